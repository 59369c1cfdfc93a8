"""The local stack of ``fbgp-al up`` (its command line: :mod:`clients.ops.up`), the soak and the
reliability tests: Redis with append-only persistence and a password, the API and one pinned
worker per core, started as child processes, each of which can be killed and started again."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from redis import Redis
from redis.exceptions import RedisError

from fbgp_al.clients.ops.logs import RotatingLog
from fbgp_al.clients.ops.redis_server import (  # the stack's names before they moved there too
    LOOPBACK,
    PASSWORD_FILE,  # noqa: F401
    WILDCARDS,
    die_with_parent,
    free_port,
    port_in_use,  # noqa: F401
    redis_password,
    start_redis,
    tls_options,
)
from fbgp_al.clients.ops.tls import server_files


def _fbgp(*args: str) -> list[str]:
    # -P: the working directory stays off sys.path (a worker.py there would shadow the package)
    return [sys.executable, "-P", "-m", "fbgp_al.clients.ops.cli", *args]


def wait_http(
    url: str,
    seconds: float = 300.0,
    process: subprocess.Popen | None = None,
    log: Path | None = None,
) -> None:
    """Until ``url`` answers 200. A server on a fresh machine can take a minute to import torch
    from a cold disk, so the wait is long; if ``process`` (the server) exits first, this says so
    at once, pointing at ``log``."""
    see = f"; see {log}" if log is not None else ""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if process is not None and process.poll() is not None:
            raise SystemExit(f"{url}: the server exited with code {process.returncode}{see}")
        time.sleep(0.1)
    raise SystemExit(f"{url} did not answer in {seconds:.0f} s{see}")


def fbgp_env(**settings) -> dict:
    """This process's environment without its ``FBGP_*`` variables, plus ``settings`` as
    ``FBGP_<NAME>`` (``api_token="x"`` gives ``FBGP_API_TOKEN=x``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FBGP_")}
    env.update({f"FBGP_{k.upper()}": str(v) for k, v in settings.items()})
    return env


class LocalStack:
    """Redis (append-only, fsynced on every write), the API and pinned workers as child processes
    of this one on loopback ports, each of which can be killed and started again: ``fbgp-al up``
    runs one and restarts what dies; the reliability tests and ``fbgp-al soak`` kill parts of it.
    Each worker leads its own process group (a signal to the stack's group does not reach it).
    Each part's output goes to ``NAME.log`` in the data directory through this process, which
    rotates it by size (:mod:`clients.ops.logs`).
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        workers: int = 1,
        port: int | None = None,
        env: dict | None = None,
        cores: list[int] | None = None,
        redis_port: int | None = None,
        redis_bind: str | None = None,
        light: bool = True,
        tied: bool = False,
        redis_tls: bool = False,
    ):
        """``light``: with two workers or more, worker 0 is light (``fbgp-al worker --light``:
        never a long refit), so that small campaigns always find a worker. ``tied``: every
        part gets SIGTERM when this process dies (:func:`die_with_parent`; start them from one
        thread, the main one: the signal follows the thread that started a part). The logs'
        size and count: this process's ``log_file_bytes`` and ``log_file_backups`` settings.
        ``redis_tls``: Redis speaks TLS only, with a CA and a certificate kept in the data
        directory's ``tls/`` (:func:`clients.ops.tls.server_files`), and every part reaches it
        by ``rediss://`` with ``FBGP_REDIS_CA_FILE``."""
        self.light = light
        self.preexec = die_with_parent if tied else None
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.redis_port = redis_port or free_port()
        # loopback for this host's processes, and ``redis_bind`` for workers on other machines
        self.redis_bind: tuple[str, ...] = (LOOPBACK,)
        if redis_bind in WILDCARDS:
            self.redis_bind = (redis_bind,)
        elif redis_bind not in (None, LOOPBACK):
            self.redis_bind = (LOOPBACK, redis_bind)
        self.redis_password = redis_password(self.data_dir)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.tls = None
        if redis_tls:
            hosts = [LOOPBACK, "localhost", *self.redis_bind[1:]]
            if self.redis_bind[0] in WILDCARDS:
                hosts += [socket.getfqdn(), socket.gethostname()]
            self.tls = server_files(self.data_dir / "tls", hosts)
        self.redis_url = self.redis_url_for(LOOPBACK)
        self.env = dict(os.environ if env is None else env, FBGP_REDIS_URL=self.redis_url)
        if self.tls is not None:
            self.env["FBGP_REDIS_CA_FILE"] = str(self.tls.ca.resolve())
        self.env.setdefault("FBGP_DATA_DIR", str(self.data_dir.resolve()))  # for /readyz
        self.cores = cores or sorted(os.sched_getaffinity(0))
        self.redis: subprocess.Popen | None = None
        self.api: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen | None] = [None] * workers
        self._logs: dict[str, RotatingLog] = {}

    # -- parts ---------------------------------------------------------------------------------
    def _log(self, name: str) -> RotatingLog:
        """Part ``name``'s log, ``NAME.log`` (one per name, kept across the part's restarts)."""
        if name not in self._logs:
            from fbgp_al.service.settings import get_settings

            settings = get_settings()
            self._logs[name] = RotatingLog(
                self.data_dir / f"{name}.log", settings.log_file_bytes, settings.log_file_backups
            )
        return self._logs[name]

    def _popen(self, command: list[str], log: str, **options) -> subprocess.Popen:
        """Part ``log`` (its log's name) started: its stdout and stderr pumped into its log."""
        process = subprocess.Popen(
            command,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=self.preexec,
            **options,
        )
        self._log(log).pump(process.stdout)
        return process

    def redis_url_for(self, host: str) -> str:
        """``FBGP_REDIS_URL`` for a process that reaches this stack's Redis at ``host``."""
        scheme = "redis" if self.tls is None else "rediss"
        return f"{scheme}://:{self.redis_password}@{host}:{self.redis_port}/0"

    def client(self, **options) -> Redis:
        """A client of this stack's Redis (over TLS where it speaks TLS), with ``options``."""
        return Redis.from_url(self.redis_url, **options, **tls_options(self.tls))

    def remote_redis_host(self) -> str:
        """The address that workers on other machines give for this stack's Redis."""
        host = self.redis_bind[-1]
        return socket.getfqdn() if host in WILDCARDS else host

    def start_redis(self) -> None:
        self.redis = start_redis(
            self.data_dir,
            self.redis_port,
            self.data_dir / "redis.log",
            password=self.redis_password,
            bind=self.redis_bind,
            preexec=self.preexec,
            rotating=self._log("redis"),
            tls=self.tls,
        )

    def start_worker(self, k: int) -> subprocess.Popen:
        core = self.cores[k % len(self.cores)]
        light = ("--light",) if self.light and k == 0 and len(self.workers) > 1 else ()
        command = _fbgp("worker", "--cpu", str(core), *light)
        self.workers[k] = self._popen(command, f"worker-{k}", start_new_session=True)
        return self.workers[k]

    def forget_dead_workers(self) -> int:
        """Unregister the workers of this host whose process is gone (how many): a killed
        worker's RQ registration would otherwise count on /readyz until its key expires, and
        registrations persist across restarts of this stack's Redis."""
        from fbgp_al.service.queues import workers

        host = socket.gethostname()
        with self.client(socket_timeout=5) as connection:
            dead = [
                w for w in workers(connection) if w.hostname == host and w.pid and not alive(w.pid)
            ]
            for worker in dead:
                worker.register_death()
        return len(dead)

    def start_api(self, wait: bool = True) -> None:
        self.api = self._popen(_fbgp("api", "--port", str(self.port)), "api")
        if wait:
            wait_http(f"{self.url}/healthz", process=self.api, log=self.data_dir / "api.log")

    def start(self, ready: bool = True) -> LocalStack:
        """Start every part (and stop what did start if one fails)."""
        try:
            self.start_redis()
            self.forget_dead_workers()
            for k in range(len(self.workers)):
                self.start_worker(k)
            self.start_api()
            if ready:
                self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def wait_ready(
        self, seconds: float = 600.0, workers: int | None = None, note: str | None = None
    ) -> None:
        """Until /readyz says yes with (at least) this many workers. A worker's first start on a
        machine compiles its kernels (numba) before it registers: a minute or more on a busy
        machine. So the wait is long, prints ``note`` once after 15 s, and ends at once if the
        API or every worker this stack started has exited."""
        want = len(self.workers) if workers is None else workers
        started = time.monotonic()
        noted = note is None
        while time.monotonic() < started + seconds:
            try:
                r = httpx.get(f"{self.url}/readyz", timeout=5)
                if r.status_code == 200 and r.json()["workers"] >= want:
                    return
            except httpx.TransportError:
                pass
            if self.api is not None and self.api.poll() is not None:
                raise SystemExit(
                    f"the API exited with code {self.api.returncode}; see "
                    f"{self.data_dir / 'api.log'}"
                )
            ours = [w for w in self.workers if w is not None]
            if ours and all(w.poll() is not None for w in ours):
                raise SystemExit(f"every worker exited; see {self.data_dir}/worker-*.log")
            if not noted and time.monotonic() > started + 15:
                print(note, flush=True)
                noted = True
            time.sleep(0.2)
        raise SystemExit(
            f"{self.url} not ready with {want} worker(s) in {seconds:.0f} s; see "
            f"{self.data_dir}/api.log and worker-*.log"
        )

    def kill_redis(self, sig: int = signal.SIGKILL) -> None:
        self.redis.send_signal(sig)
        self.redis.wait(timeout=30)

    def kill_api(self, sig: int = signal.SIGKILL) -> None:
        self.api.send_signal(sig)
        self.api.wait(timeout=30)

    def kill_worker(self, k: int, sig: int = signal.SIGKILL) -> None:
        """The worker and its work horse (which RQ puts in a process group of its own)."""
        horse = self.horse_of(k)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.workers[k].pid, sig)
            if horse is not None:
                os.kill(horse, sig)
        self.workers[k].wait(timeout=30)

    def horse_of(self, k: int) -> int | None:
        """The pid of worker ``k``'s work horse, if a job runs."""
        pid = self.workers[k].pid
        with contextlib.suppress(OSError):
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            return int(children[0]) if children else None
        return None

    def children(self) -> list[subprocess.Popen]:
        return [p for p in (self.redis, *self.workers, self.api) if p is not None]

    def restart_dead(self) -> list[str]:
        """Start again whatever exited; the names of what was."""
        restarted = []
        if self.redis is not None and self.redis.poll() is not None:
            self.start_redis()
            restarted.append("redis")
        dead = [
            k
            for k, worker in enumerate(self.workers)
            if worker is not None and worker.poll() is not None
        ]
        if dead or restarted:
            with contextlib.suppress(RedisError):  # left to the keys' expiry
                self.forget_dead_workers()
        for k in dead:
            self.start_worker(k)
            restarted.append(f"worker-{k}")
        if self.api is not None and self.api.poll() is not None:
            self.start_api(wait=False)
            restarted.append("api")
        return restarted

    def stop(self) -> None:
        """Stop the API and the workers (SIGTERM; a refit under way may take up to a minute),
        wait for them, and only then Redis, which they talk to until they exit."""
        for group in ([self.api, *self.workers], [self.redis]):
            group = [child for child in group if child is not None]
            for child in group:
                if child.poll() is None:
                    child.send_signal(signal.SIGTERM)
            for child in group:
                try:
                    child.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
        for log in self._logs.values():
            log.close()

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds (user and system) each part has used so far: ``redis``, ``api`` and
        ``workers`` (all of them, with the jobs' work horses they have waited for), read from
        ``/proc``. CPU time, unlike a request's wall time, stays put while other processes load
        the machine: it is how ``fbgp-al bench-service`` compares two trees on a shared one."""
        parts = {"redis": [self.redis], "api": [self.api], "workers": self.workers}
        return {
            name: sum(process_seconds(p.pid) for p in group if p is not None and p.poll() is None)
            for name, group in parts.items()
        }

    def __enter__(self) -> LocalStack:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host (someone else's too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's
        return True
    return True


def process_seconds(pid: int) -> float:
    """CPU seconds process ``pid`` used, with its children's that it has waited for (Linux's
    ``/proc/PID/stat``: utime, stime, cutime, cstime); 0 once the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")
