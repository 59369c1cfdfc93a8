import pytest
from fastapi.testclient import TestClient
from redis import Redis

from service.app import app
from service.settings import Settings, get_settings


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
