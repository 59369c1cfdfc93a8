"""A disk or a Redis memory near full is reported by ``/readyz`` (``degraded``, still 200) and
``/metrics`` before Redis refuses the writes labels need; once it refuses them ``/readyz`` is a
503 that says why. Against real Redis servers (one of this module's own for its memory), a real
worker and the real disk of a folder; the thresholds are settings."""

import shutil
import signal
import subprocess
import time

import pytest
from fastapi.testclient import TestClient
from redis import Redis
from rq import Worker

from fbgp_al.service import capacity
from fbgp_al.service.app import app
from fbgp_al.service.settings import Settings, get_settings
from tests.conftest import start_redis, start_worker, stop
from tests.service.test_observability import _scrape, _value


def _in_process(settings: Settings):
    app.dependency_overrides[get_settings] = lambda: settings
    return TestClient(app)


def test_a_nearly_full_disk_is_degraded_on_readyz_and_in_metrics(client, settings, tmp_path):
    """The data directory's free space below FBGP_DISK_FREE_MIN_BYTES: ready, but degraded,
    with the figures; above it, ready."""
    free = shutil.disk_usage(tmp_path).free
    roomy = settings.model_copy(update={"data_dir": str(tmp_path), "disk_free_min_bytes": 1})
    with _in_process(roomy) as api:
        ready = api.get("/readyz")
        assert ready.status_code == 200 and ready.json()["status"] == "ready", ready.text
        samples = _scrape(api)
    assert _value(samples, "fbgp_data_disk_free_bytes") == pytest.approx(free, rel=0.05)
    assert _value(samples, "fbgp_data_disk_size_bytes") >= free
    assert _value(samples, "fbgp_capacity_state", state="ready") == 1
    assert _value(samples, "fbgp_redis_memory_bytes") > 0
    tight = roomy.model_copy(update={"disk_free_min_bytes": 2 * free})
    with _in_process(tight) as api:
        degraded = api.get("/readyz")
        samples = _scrape(api)
    assert degraded.status_code == 200, degraded.text
    body = degraded.json()
    assert body["ready"] and body["status"] == "degraded" and body["workers"] >= 1, body
    assert "disk is nearly full" in body["detail"] and "FBGP_DISK_FREE_MIN_BYTES" in body["detail"]
    assert _value(samples, "fbgp_capacity_state", state="degraded") == 1
    assert _value(samples, "fbgp_capacity_state", state="ready") == 0
    gone = roomy.model_copy(update={"data_dir": str(tmp_path / "missing")})
    with _in_process(gone) as api:
        body = api.get("/readyz").json()
    assert body["status"] == "degraded" and "cannot be read" in body["detail"], body


@pytest.fixture
def own_redis(tmp_path):
    """A Redis server of this test's own (its memory limit is changed), with a real worker."""
    process, url = start_redis(tmp_path)
    worker = start_worker(url, tmp_path / "worker.log")
    redis = Redis.from_url(url)
    try:
        deadline = time.monotonic() + 120
        while not Worker.all(connection=redis):
            assert worker.poll() is None and time.monotonic() < deadline, "no worker"
            time.sleep(0.1)
        yield url, redis
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
        stop(process)


def test_redis_memory_near_its_limit_is_degraded_and_at_it_unavailable(own_redis, make_body):
    """Past FBGP_REDIS_MEMORY_MAX_FRACTION of Redis's maxmemory: degraded while labels are still
    taken; at maxmemory (noeviction) a label is refused (503: nothing stored) and /readyz says
    so with a 503; with room again the label is taken."""
    url, redis = own_redis
    settings = Settings(redis_url=url, job_wait_seconds=60, redis_memory_max_fraction=0.5)
    with _in_process(settings) as api:
        campaign = api.post("/campaigns", json=make_body()).json()["id"]
        tickets = [api.get(f"/campaigns/{campaign}/next").json()["ticket"] for _ in range(2)]
        assert api.get("/readyz").json()["status"] == "ready"
        used = int(redis.info("memory")["used_memory"])
        limit = int(1.5 * used)  # past half of it, well below it
        redis.config_set("maxmemory", limit)
        degraded = api.get("/readyz")
        assert degraded.status_code == 200, degraded.text
        assert degraded.json()["status"] == "degraded", degraded.text
        assert "Redis's memory is nearly full" in degraded.json()["detail"]
        samples = _scrape(api)
        assert _value(samples, "fbgp_redis_memory_limit_bytes") == limit
        assert _value(samples, "fbgp_capacity_state", state="degraded") == 1
        r = api.post(f"/campaigns/{campaign}/label", json={"ticket": tickets[0], "y": 0.5})
        assert r.status_code == 201, r.text  # still taken
        redis.config_set("maxmemory", int(redis.info("memory")["used_memory"]) // 2)
        refused = api.post(f"/campaigns/{campaign}/label", json={"ticket": tickets[1], "y": 0.7})
        assert refused.status_code == 503 and "refuses writes" in refused.text, refused.text
        down = api.get("/readyz")
        assert down.status_code == 503, down.text
        assert down.json()["status"] == "unavailable" and not down.json()["ready"]
        assert "memory is full" in down.json()["detail"], down.text
        redis.config_set("maxmemory", 0)
        assert api.get("/readyz").json()["status"] == "ready"
        r = api.post(f"/campaigns/{campaign}/label", json={"ticket": tickets[1], "y": 0.7})
        assert r.status_code == 201, r.text
    app.dependency_overrides.clear()


def test_an_eviction_policy_and_a_failed_append_are_reported():
    """What ``/readyz`` makes of what Redis reports: a maxmemory-policy that would evict
    campaigns' keys, and a failed write of the append-only file (a full disk)."""
    settings = Settings()
    lru = capacity.Capacity(
        memory_bytes=10, maxmemory=1000, system_memory=0, policy="allkeys-lru", aof_ok=True
    )
    assert lru.verdict(settings)[0] == capacity.DEGRADED and "evicts" in lru.verdict(settings)[1]
    failed = capacity.Capacity(
        memory_bytes=10, maxmemory=0, system_memory=10**9, policy="noeviction", aof_ok=False
    )
    assert failed.verdict(settings)[0] == capacity.UNAVAILABLE
    assert "append-only file" in failed.verdict(settings)[1]
