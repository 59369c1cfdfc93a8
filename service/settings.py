"""Deployment settings, read from the environment (``FBGP_*``). Each setting's docstring is its
description in the manual's settings reference, which is generated from this class."""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FBGP_", use_attribute_docstrings=True)

    # Redis and access
    redis_url: str = "redis://127.0.0.1:6379/0"
    """The Redis that holds every campaign, with its password (`redis://:PASSWORD@host:port/db`);
    `fbgp-al up` and docker compose set it. `rediss://` speaks TLS to it: the server's
    certificate is checked against `redis_ca_file` (or the system's CAs) and must name the
    URL's host."""
    redis_ca_file: str | None = None
    """With a `rediss://` URL: the CA certificate(s), a PEM file, that signed Redis's server
    certificate (`fbgp-al up --redis-tls` makes one: `tls/ca.crt` in its data directory).
    Unset: the system's CAs."""
    redis_cert_file: str | None = None
    """With a `rediss://` URL: this process's client certificate (PEM), for a Redis that asks
    for one (`tls-auth-clients yes`); with `redis_key_file`."""
    redis_key_file: str | None = None
    """The private key (PEM, unencrypted) of `redis_cert_file`."""
    api_token: str | None = None
    """The service token: with it set, every `/campaigns` and `/teams` call needs `Authorization:
    Bearer <token>` (this one, a team's or a campaign's). Unset: the service is open (bind it to
    loopback)."""

    # Transport
    header_timeout_seconds: float = 10.0
    """A connection whose request line and headers are not all in this many seconds after it
    opened (or after a request's first byte) is closed (`fbgp-al api`)."""
    keep_alive_seconds: float = 15.0
    """An idle connection between two requests is closed after this many seconds: longer than
    the 5 s a client of httpx (the SDK's) keeps one, so no request meets a closing
    connection."""
    body_timeout_seconds: float = 60.0
    """A request body not all in this many seconds after its headers is answered 408."""
    job_wait_seconds: float = 120.0
    """Seconds the API waits for a worker's answer to `/predict`, `/acquisition` or `/evaluate`
    before it answers 503."""
    max_wait_seconds: float = 60.0
    """The longest long poll a client may ask of `/next` (`?wait=`)."""
    max_body_bytes: int = 16 * 1024 * 1024
    """The largest request body the API reads, in bytes (413 beyond it)."""
    large_body_bytes: int = 1024 * 1024
    """A request body over this many bytes is parsed, validated and answered in a thread, off
    the event loop that serves every other request."""

    # Limits on one campaign's work: a campaign or a request beyond one is a 422 that names it
    limit_mcmc_iterations: int = 50_000
    """NUTS iterations of one refit: chains x (warm-up + the most draws a chain may run)."""
    limit_mode_draws: int = 5_000
    """Draws the posterior mode's KDE looks at: more are subsampled to this many (seeded)."""
    limit_scoring_work: int = 20_000_000
    """GP predictions of one scoring: candidates (`pool_subsample`) x acquisition draws."""
    limit_pending: int = 1_000
    """Points out at once in a parallel campaign (`max_pending`), each a fantasy in every
    scoring (not for `random`)."""
    limit_labels: int = 5_000
    """Labels of one campaign (`max_labels`, and the labels after an import): an exact GP's
    refit costs n^3 per gradient evaluation (at 5,000 Hartmann 6-D labels about 6.5 minutes
    from a label to the next point on one core, a worker's memory at most 3.6 GB)."""
    limit_evaluate_points: int = 4_000
    """Test points of one `/evaluate`: its joint NLML factors an m x m covariance."""
    limit_model_calls: int = 1
    """Model calls (`/predict`, `/acquisition`, `/evaluate`, `/sensitivity`) of one campaign out
    at once; more are 429. Workers serve these first, so a campaign that kept several out could
    hold them from every other campaign's refits."""
    model_call_share: float = Field(0.5, gt=0, le=1)
    """The share of the stack's workers that model calls (`/predict`, `/acquisition`,
    `/evaluate`, `/sensitivity`) may hold at once, across all campaigns and teams, at least
    one call; beyond it a call is 503 with Retry-After. Workers serve these first, so without
    a bound a few campaigns' calls could hold every worker from every campaign's refits."""
    limit_grid_points: int = 2**62
    """Points of a grid pool (`points_per_dim^inputs` for float inputs); at most 2^62, the range
    of its indices."""
    limit_team_campaigns: int = 1_000
    """Campaigns one team's token may hold at once (a careless team's loop stops here)."""
    busy_retry_after_seconds: int = 5
    """A model call no worker took in time (503): the client asks again after this many seconds
    (`Retry-After`)."""
    store_retry_after_seconds: int = 2
    """Redis unreachable (503): the client asks again after this many seconds
    (`Retry-After`)."""
    next_poll_seconds: float = 1.0
    """A long poll of `/next` looks again at least this often without a wake-up (a message lost,
    a lease run out); it is woken at once when the campaign changes."""
    lock_timeout_seconds: float = 10.0
    """The lock that serializes the choice of points for one campaign across API processes is
    held at most this long, and waited for at most this long (503 beyond)."""

    # Refits' heartbeats and RQ's timings
    heartbeat_seconds: float = 2.0
    """A running refit writes a heartbeat into its campaign's state this often."""
    refit_lease_seconds: float = 15.0
    """A refit whose heartbeat is older than this is taken for dead and enqueued again."""
    worker_ttl: int = 30
    """RQ: an idle worker's registration lives this many seconds plus 60 (RQ's default: 420)."""
    job_monitoring_interval: int = 5
    """RQ: a busy worker's registration lives this many seconds plus 60."""
    maintenance_interval: int = 20
    """Seconds between a worker's looks for stuck campaigns (refits to revive)."""

    # A campaign whose last refit's time, scaled to its labels now, is more than
    # long_refit_seconds, or, before its first model,
    # whose refit would run more than long_refit_work NUTS iterations (costs.refit_work: twice
    # the defaults' at 100 labels) or score more than long_refit_scoring_work predictions (twice
    # the defaults'), refits on the long queue, which light workers (`fbgp-al worker --light`;
    # worker 0 of `fbgp-al up` and of compose) never take: a small campaign always finds one.
    long_refit_seconds: float = 15.0
    """A campaign whose last refit's time, scaled to the labels it has now (a refit's work grows
    as n^3: an import of many labels counts at once), is longer than this many seconds refits on
    the long queue, which light workers (`fbgp-al worker --light`) never take: a small campaign
    always finds one."""
    long_refit_work: float = 48_000
    """Before its first model, a campaign whose refit would run more NUTS iterations than this
    (twice the defaults' at 100 labels) refits on the long queue."""
    long_refit_scoring_work: int = 3_000_000
    """Before its first model, a campaign whose scoring would make more GP predictions than this
    (twice the defaults') refits on the long queue."""

    # Jobs: time, memory, revivals and back-off
    job_timeout_seconds: float = 60.0
    """A job's RQ timeout is this many seconds plus its estimated work (below), at most
    `job_timeout_max_seconds`, and for a short job at most what the API waits for it."""
    refit_iteration_seconds: float = 0.05
    """A refit's estimated work: chains x (warmup + most samples) NUTS iterations at this many
    seconds each, times (1 + (n / 100)^3) for n labels, and features / 6 beyond 6 features."""
    long_call_seconds: float = 1.0
    """A model call (`/predict`, `/acquisition`, `/evaluate`, `/sensitivity`) estimated to take
    longer than this on a worker (a 20,000-point `/predict` at 8 labels, 4,000 at 200; a
    2,000-point `/evaluate`; `/sensitivity` past 115 labels) waits in a queue of its own, which
    light workers never take: a small campaign's refit then waits behind no such call on the
    light worker."""
    short_point_seconds: float = 0.002
    """A short job's estimated work: its points at this many seconds each, times
    (1 + (n / 100)^2) for n labels."""
    job_timeout_max_seconds: float = 6 * 3600.0
    """The longest timeout of any job, in seconds."""
    job_memory_mb: int = 4096
    """The address space (RLIMIT_AS) a job's work horse may add to its worker's own, in MiB (0:
    no bound); a job beyond it fails with a MemoryError (a short job: 413)."""
    refit_max_attempts: int = 3
    """A refit that fails this many times in a row (an error, or its job died: killed, out of
    time or memory) marks its campaign failed until its owner retries it
    (`POST /campaigns/{id}/retry`)."""
    refit_backoff_seconds: float = 5.0
    """After the k-th failed refit in a row, the next waits
    min(`refit_backoff_max_seconds`, this x 2^(k-1)) seconds (new labels end the wait); a
    first death is revived at once."""
    refit_backoff_max_seconds: float = 300.0
    """The longest wait between failed refits, in seconds."""
    expired_ticket_seconds: float = 86400.0
    """A ticket whose lease ran out, still without a label, is kept this long afterwards (a late
    label for it is taken while its point has none), then pruned; so is one whose run failed
    or was abandoned, or that was superseded (its report sent again is then a 404)."""
    keep_ended_tickets: int = Field(default=10_000, ge=1)
    """Of those tickets (lease run out, run failed or abandoned, superseded), one campaign keeps
    at most this many, the latest: the oldest beyond are pruned before
    `expired_ticket_seconds` runs out, so that a simulator that takes points and gives them
    back, or fails them, as fast as it can costs a bounded amount of memory. A labeled ticket
    is never pruned (its label sent again is still recognized)."""
    keep_runs: int = Field(default=1_000, ge=1)
    """Failed and abandoned runs of one campaign kept in full, the latest of each kind (all are
    counted), so that simulators that keep failing or giving points back cannot fill Redis."""
    keep_history: int = Field(default=10_000, ge=1)
    """Events of one campaign's history kept, the latest (models, failed refits, stops,
    resumes): a refit runs again after every failed or abandoned run, so churn adds models
    without end. The stopping rule reads the latest `patience` models since the last resume,
    so an older event dropped can delay a stop, never cause one; keep this above the largest
    `patience` (1000)."""
    keep_evaluations: int = Field(default=2_000, ge=1)
    """`/evaluate` results of one campaign kept, the latest (in `/history` and the learning
    curve), apart from the other events, so that evaluations never push out the models the
    stopping rule reads. The default keeps one per label of the largest campaign
    (`limit_labels`)."""

    # Room left: /readyz and /metrics (service/capacity.py)
    data_dir: str | None = None
    """The folder of Redis's append-only file, as this process sees it: `/readyz` and
    `/metrics` report its disk's free space. `fbgp-al up` sets it to its data directory; docker
    compose mounts Redis's volume in the API's container there. Unset: not reported."""
    disk_free_min_bytes: int = Field(default=2**30, ge=0)
    """`/readyz` says `degraded` (still 200) when `data_dir`'s disk has less free space than
    this: Redis refuses writes, labels included, once it cannot append to its file."""
    redis_memory_max_fraction: float = Field(default=0.9, gt=0, le=1)
    """`/readyz` says `degraded` (still 200) when Redis's used memory passes this fraction of
    its `maxmemory` (or of the machine's memory when it has none); at its `maxmemory` it refuses
    writes, and `/readyz` answers 503."""

    # Logs of `fbgp-al up`'s parts (docker compose: its logging options rotate them)
    log_file_bytes: int = Field(default=20 * 2**20, ge=4096)
    """`fbgp-al up` writes each part's output (the API, each worker, Redis) to `NAME.log` in its
    data directory; past this many bytes it becomes `NAME.log.1` (the older ones `.2`, ...) and
    a new one starts, between two lines."""
    log_file_backups: int = Field(default=4, ge=0)
    """Rotated log files kept per part (`NAME.log.1` to `NAME.log.N`; the oldest beyond is
    deleted): a part's logs take at most (this + 1) x `log_file_bytes` of disk."""

    @model_validator(mode="after")
    def _tls_needs_rediss(self):
        tls = {
            "FBGP_REDIS_CA_FILE": self.redis_ca_file,
            "FBGP_REDIS_CERT_FILE": self.redis_cert_file,
            "FBGP_REDIS_KEY_FILE": self.redis_key_file,
        }
        given = [name for name, value in tls.items() if value]
        if given and not self.redis_url.startswith("rediss://"):
            raise ValueError(
                f"{' and '.join(given)} set, but FBGP_REDIS_URL is not rediss://: the "
                "connection would not use TLS (write rediss://:PASSWORD@host:port/0)"
            )
        if bool(self.redis_cert_file) != bool(self.redis_key_file):
            raise ValueError("FBGP_REDIS_CERT_FILE and FBGP_REDIS_KEY_FILE go together")
        return self

    def redis_options(self) -> dict:
        """redis-py's keyword arguments for `redis_url` beside the URL: the TLS files of a
        `rediss://` URL, the server's certificate and name checked (none for `redis://`).
        Every client of the product's Redis (the API, its long polls' listener, the workers,
        RQ, the command line) is made with them."""
        if not self.redis_url.startswith("rediss://"):
            return {}
        return {
            "ssl_cert_reqs": "required",
            "ssl_check_hostname": True,
            "ssl_ca_certs": self.redis_ca_file,
            "ssl_certfile": self.redis_cert_file,
            "ssl_keyfile": self.redis_key_file,
        }


@lru_cache
def get_settings() -> Settings:
    return Settings()
