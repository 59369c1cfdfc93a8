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
