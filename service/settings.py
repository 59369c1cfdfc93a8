"""Deployment settings, read from the environment (``FBGP_*``)."""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FBGP_")

    redis_url: str = "redis://127.0.0.1:6379/0"
    api_token: str | None = None
    # Access and transport
    # a connection whose request line and headers are not all in this many seconds after it
    # opened (or after a request's first byte) is closed
    header_timeout_seconds: float = 10.0
    # a request body not all in this many seconds after its headers is answered 408
    body_timeout_seconds: float = 60.0
    # seconds the API waits for a prediction or evaluation job before answering 503
    job_wait_seconds: float = 120.0
    # longest long poll a client may ask of /next
    max_wait_seconds: float = 60.0
    # largest request body the API reads (413 beyond it)
    max_body_bytes: int = 16 * 1024 * 1024
    # Limits on one campaign's work: a campaign or a request beyond one is a 422 that names it
    # NUTS iterations of one refit: chains x (warm-up + the most draws a chain may run)
    limit_mcmc_iterations: int = 50_000
    # draws the posterior mode's KDE looks at: more are subsampled to this many (seeded)
    limit_mode_draws: int = 5_000
    # GP predictions of one scoring: candidates (pool_subsample) x acquisition draws
    limit_scoring_work: int = 20_000_000
    # points out at once in a parallel campaign, each a fantasy in every scoring (not `random`)
    limit_pending: int = 1_000
    # labels of one campaign (max_labels, and the labels after an import): the exact GP's
    # refit costs n^3 per gradient evaluation
    limit_labels: int = 2_000
    # test points of one /evaluate: its joint NLML factors an m x m covariance
    limit_evaluate_points: int = 4_000
    # model calls (predict, acquisition, evaluate) of one campaign out at once; more are 429:
    # workers serve these first, so a campaign that kept several out could hold them from
    # every other campaign's refits
    limit_model_calls: int = 1
    # points of a grid pool (points_per_dim^inputs); at most 2^62, the range of its indices
    limit_grid_points: int = 2**62
    # campaigns one team's token may hold at once (a careless team's loop stops here)
    limit_team_campaigns: int = 1_000
    # a model call no worker took in time (503): the client asks again after this (Retry-After)
    busy_retry_after_seconds: int = 5
    # Redis unreachable (503): the client asks again after this (Retry-After)
    store_retry_after_seconds: int = 2
    # a long poll of /next looks again at least this often without a wake-up (a message lost,
    # a lease run out); it is woken at once when the campaign changes
    next_poll_seconds: float = 1.0
    # the lock that serializes the choice of points for one campaign across API processes:
    # held at most this long, waited for at most this long
    lock_timeout_seconds: float = 10.0

    # A running refit writes a heartbeat into its campaign's state this often; a refit whose
    # heartbeat is older than ``refit_lease_seconds`` is taken for dead and enqueued again.
    heartbeat_seconds: float = 2.0
    refit_lease_seconds: float = 15.0
    # RQ: an idle worker's registration lives worker_ttl + 60 s, a busy one's
    # job_monitoring_interval + 60 s; stuck campaigns are looked for every maintenance_interval.
    worker_ttl: int = 30
    job_monitoring_interval: int = 5
    maintenance_interval: int = 20

    # A campaign whose last refit took more than long_refit_seconds, or, before its first model,
    # whose refit would run more than long_refit_work NUTS iterations (costs.refit_work: twice
    # the defaults' at 100 labels) or score more than long_refit_scoring_work predictions (twice
    # the defaults'), refits on the long queue, which light workers (`fbgp-al worker --light`;
    # worker 0 of `fbgp-al up` and of compose) never take: a small campaign always finds one.
    long_refit_seconds: float = 15.0
    long_refit_work: float = 48_000
    long_refit_scoring_work: int = 3_000_000

    # Jobs: time, memory, revivals and back-off
    # A job's RQ timeout: job_timeout_seconds plus its estimated work. A refit's work is chains x
    # (warmup + most samples) NUTS iterations at refit_iteration_seconds each, times
    # (1 + (n / 100)^3) for n labels and features / 6 beyond 6 features; a short job's, its
    # points at short_point_seconds each, times (1 + (n / 100)^2); never more than
    # job_timeout_max_seconds (nor, for a short job, than the API waits for it: it is stopped
    # then).
    job_timeout_seconds: float = 60.0
    refit_iteration_seconds: float = 0.05
    short_point_seconds: float = 0.002
    job_timeout_max_seconds: float = 6 * 3600.0
    # the address space (RLIMIT_AS) a work horse may add to the worker's own, in MiB (0: no bound);
    # a job beyond it fails with a MemoryError
    job_memory_mb: int = 4096
    # a refit that fails this many times in a row (an error, or its job died: killed, out of time
    # or memory) marks its campaign failed until its owner retries it; after the k-th failure in a
    # row it waits min(refit_backoff_max_seconds, refit_backoff_seconds * 2^(k-1)) to run again
    # (new labels end the wait), but for a first death, revived at once (2^(k-2) after more)
    refit_max_attempts: int = 3
    refit_backoff_seconds: float = 5.0
    refit_backoff_max_seconds: float = 300.0
    # a ticket whose lease ran out, still without a label, is kept this long afterwards (a late
    # label for it is accepted while its point has none), then pruned; so is one whose run
    # failed or was abandoned, or that was superseded (its report sent again is then a 404)
    expired_ticket_seconds: float = 86400.0
    # failed and abandoned runs of one campaign kept in full, the latest (each kind; all are
    # counted), so that simulators that keep failing or giving points back cannot fill Redis
    keep_runs: int = Field(default=1_000, ge=1)


@lru_cache
def get_settings() -> Settings:
    return Settings()
