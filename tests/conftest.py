import os

# One BLAS and OpenMP thread in each test process and in the processes the tests start, as the
# workers run: the suite runs a process per core side by side, and BLAS's threads of one spin on
# the other's core (a default refit's test took 60 s instead of 7 with two such processes on two
# cores). Set before numpy and torch load their libraries; a value already set is kept.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from redis import Redis

from fbgp_al.clients.ops.stack import fbgp_env, free_port

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _one_thread_and_seeded():
    """Every test starts seeded and on one thread (the workers run that way)."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    yield


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory):
    """A redis-server of the tests' own on a free loopback port, stopped afterwards."""
    process, url = start_redis(tmp_path_factory.mktemp("redis"))
    yield url
    stop(process)


def start_redis(data: Path) -> tuple[subprocess.Popen, str]:
    """A redis-server on a free loopback port, its files in ``data``, answering when this
    returns; and its URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed (.ci/run installs Debian's redis-server)")
    port = free_port()
    process = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(data),
            "--save",
            "",
            "--appendonly",
            "no",
            "--logfile",
            str(data / "redis.log"),
        ],
        stdout=subprocess.DEVNULL,
    )
    client = Redis(port=port)
    for _ in range(200):
        try:
            client.ping()
            break
        except Exception:
            time.sleep(0.05)
    return process, f"redis://127.0.0.1:{port}/0"


@pytest.fixture(scope="session")
def worker_process(redis_url, tmp_path_factory):
    """One real RQ worker (``fbgp-al worker``) serving the test Redis."""
    log = tmp_path_factory.mktemp("worker") / "worker.log"
    process = start_worker(redis_url, log)
    from rq import Worker

    connection = Redis.from_url(redis_url)
    deadline = time.monotonic() + 120
    while not Worker.all(connection=connection):
        if process.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"the worker did not start:\n{log.read_text()}")
        time.sleep(0.1)
    yield process
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()


def start_worker(
    redis_url: str, log: Path | None = None, *options: str, **settings
) -> subprocess.Popen:
    """``fbgp-al worker`` (with ``options``, and ``settings`` as ``FBGP_*`` variables) serving
    ``redis_url``, its output in ``log`` (or discarded); it may still be starting when this
    returns."""
    command = [sys.executable, "-m", "fbgp_al.clients.ops.cli", "worker", *options]
    env = fbgp_env(redis_url=redis_url, **settings)
    if log is None:
        return subprocess.Popen(
            command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
    with open(log, "w") as out:
        return subprocess.Popen(command, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)


def start_api(redis_url: str, log: Path, **settings) -> tuple[subprocess.Popen, str]:
    """``fbgp-al api`` as a real server on a free port, serving ``redis_url``; ``settings`` are
    ``FBGP_*`` variables (``api_token=...``), none set otherwise."""
    from fbgp_al.clients.ops.stack import wait_http

    port = free_port()
    env = fbgp_env(redis_url=redis_url, **settings)
    with open(log, "w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "fbgp_al.clients.ops.cli", "api", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/healthz", process=process, log=log)
    except SystemExit:
        process.kill()
        pytest.fail(f"the API did not start:\n{log.read_text()}")
    return process, url


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.fixture(scope="session")
def api_url(redis_url, worker_process, tmp_path_factory):
    """The API as a real server on a free port, serving the test Redis and worker, without a
    token; stopped afterwards."""
    process, url = start_api(redis_url, tmp_path_factory.mktemp("api") / "api.log")
    yield url
    stop(process)


@pytest.fixture
def make_body():
    """A small 1-D campaign body (Gramacy & Lee's box), with changes."""
    return _campaign_body


def _campaign_body(**changes) -> dict:
    body = {
        "name": "test",
        "inputs": [{"name": "x", "lower": 0.5, "upper": 2.5}],
        "pool": {"type": "grid", "points_per_dim": 101},
        "acquisition": "qb-mgp",
        "initial_design": {"type": "maximin-lhs", "size": 3},
        "max_labels": 6,
        "mcmc": {"chains": 2, "warmup": 30, "samples": 20, "thinning": 2},
        "seed": 1,
    }
    body.update(changes)
    return body
