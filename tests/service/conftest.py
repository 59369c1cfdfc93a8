import csv
import io
import signal
import subprocess
import time

import httpx
import pytest
from fastapi.testclient import TestClient
from redis import Redis
from rq import Worker

from fbgp_al.service.app import app
from fbgp_al.service.settings import Settings, get_settings
from fbgp_al.service.store import CampaignStore
from tests.conftest import start_api, start_worker, stop


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


# -- a second API with a service token and a small body limit (the middleware and errors tests)
ADMIN = "admin-token-for-the-tests"
LIMIT = 64 * 1024


@pytest.fixture(scope="module")
def guarded(redis_url, worker_process, tmp_path_factory):
    """A second API with ``FBGP_API_TOKEN`` set and a small body limit; its log file. It uses
    a Redis database of its own that no worker serves: fuzzed campaigns (up to 32 chains of
    10,000 draws) must not keep the tests' worker busy, and no model is ever fitted there.
    Long polls last at most a second: a fuzzed ``/next?wait=60`` would otherwise outlast
    schemathesis's request timeout and count as a network error."""
    log = tmp_path_factory.mktemp("guarded") / "api.log"
    own_db = redis_url.rsplit("/", 1)[0] + "/1"
    process, url = start_api(own_db, log, api_token=ADMIN, max_body_bytes=LIMIT, max_wait_seconds=1)
    yield url, log
    stop(process)


def admin_client(url: str, token: str = ADMIN) -> httpx.Client:
    """A client of ``url`` with the service token ``token``."""
    return httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {token}"})


def guarded_body(**changes) -> dict:
    """A small campaign for the guarded APIs, with changes."""
    body = {
        "name": "guarded",
        "inputs": [{"name": "x", "lower": 0.5, "upper": 2.5}],
        "pool": {"type": "grid", "points_per_dim": 101},
        "max_labels": 6,
        "mcmc": {"chains": 2, "warmup": 30, "samples": 20, "thinning": 2},
        "seed": 1,
    }
    body.update(changes)
    return body


def next_ticket(client, campaign: str, seconds: float = 60) -> dict | None:
    """The next ticket (None once /next answers 409 or 410), waiting while it answers 202."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        r = client.get(f"/campaigns/{campaign}/next")
        if r.status_code == 200:
            return r.json()
        if r.status_code in (409, 410):
            return None
        assert r.status_code == 202, r.text
        time.sleep(0.05)
    raise AssertionError("no point in time")


def observations_csv(client, campaign: str, reader=csv.reader) -> list:
    """The campaign's observations as CSV, read by ``reader`` (rows, or dicts by column)."""
    r = client.get(f"/campaigns/{campaign}/observations", headers={"Accept": "text/csv"})
    return list(reader(io.StringIO(r.text)))
