import signal
import subprocess
import time

import pytest
from fastapi.testclient import TestClient
from redis import Redis
from rq import Worker

from service.app import app
from service.settings import Settings, get_settings
from service.store import CampaignStore
from tests.conftest import start_worker


@pytest.fixture
def settings(redis_url):
    return Settings(redis_url=redis_url, job_wait_seconds=60)


@pytest.fixture
def client(settings, worker_process):
    """The API in process, against the tests' Redis and worker; each test starts empty."""
    redis = Redis.from_url(settings.redis_url)
    keys = list(redis.scan_iter("fbgp:*"))  # campaigns only: the worker's registration stays
    if keys:
        redis.delete(*keys)
    app.dependency_overrides[get_settings] = lambda: settings
    with TestClient(app) as c:
        yield c
    app.dependency_overrides.clear()


@pytest.fixture(scope="module")
def bare_store(redis_url):
    """A store on a database of the tests' Redis that no worker serves, empty at the start and
    at the end of the module: for the store's scripts alone."""
    redis = Redis.from_url(redis_url.rsplit("/", 1)[0] + "/13")
    redis.flushdb()
    yield CampaignStore(redis)
    redis.flushdb()


@pytest.fixture(scope="module")
def second_worker(redis_url, worker_process):
    """A second worker beside the session's, for the tests of one module."""
    process = start_worker(redis_url)
    connection = Redis.from_url(redis_url)
    deadline = time.monotonic() + 120
    while Worker.count(connection=connection) < 2:
        assert process.poll() is None and time.monotonic() < deadline, "no second worker"
        time.sleep(0.1)
    yield process
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:  # never leave a worker behind
        process.kill()
        process.wait()


def label_design(client, campaign: str, ys) -> None:
    """Label the points ``/next`` hands out, one per value of ``ys``, each answered 201."""
    for y in ys:
        ticket = client.get(f"/campaigns/{campaign}/next").json()["ticket"]
        r = client.post(f"/campaigns/{campaign}/label", json={"ticket": ticket, "y": y})
        assert r.status_code == 201, r.text


def wait_for_model(client, campaign: str, version: int, seconds: float = 60) -> dict:
    """The campaign's status once its model ``version`` is stored (``seconds`` at most)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status = client.get(f"/campaigns/{campaign}").json()
        if status["model_version"] == version:
            return status
        time.sleep(0.05)
    raise AssertionError(f"no model {version}: {status}")
