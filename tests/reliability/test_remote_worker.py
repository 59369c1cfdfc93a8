"""A worker on another host: ``fbgp-al worker`` in a network namespace of the test's own, linked
to this host by a veth pair with addresses of the test's own (the ``link`` fixture,
tests/reliability/conftest.py), joins a Redis that requires a password and listens on the link's
host end only. A campaign is refitted by that worker; a worker without the password is refused
and never registers. Needs root and ``ip netns`` (skipped otherwise); touches no address, route
or interface but the ones it creates."""

import re
import time

import pytest
from fastapi.testclient import TestClient
from redis import Redis
from rq import Worker
from rq.registry import FinishedJobRegistry

from fbgp_al.clients.ops.stack import free_port, start_redis
from fbgp_al.service.app import app
from fbgp_al.service.queues import REFIT, fetch_job
from fbgp_al.service.settings import Settings, get_settings
from tests.reliability.conftest import labeled_design

pytestmark = pytest.mark.slow  # a fault test: `make test-fast` leaves it out

PASSWORD = "remote-worker-test-password-0123"
REFUSED = re.compile(r"NOAUTH|WRONGPASS|authenticat|invalid username-password", re.I)


@pytest.fixture
def redis_on_link(link, tmp_path):
    """A redis-server with a password, listening on the link's host end only: its URL."""
    port = free_port()
    data = tmp_path / "redis"
    process = start_redis(data, port, data / "redis.log", password=PASSWORD, bind=(link.host_ip,))
    link.processes.append(process)
    return f"redis://:{PASSWORD}@{link.host_ip}:{port}/0"


def _until(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {seconds:.0f} s")


def test_a_worker_in_another_network_namespace_refits_a_campaign(link, redis_on_link, tmp_path):
    connection = Redis.from_url(redis_on_link)
    log = tmp_path / "remote-worker.log"
    process = link.start_worker(redis_on_link, "remote-worker", log)

    def registered():
        assert process.poll() is None, log.read_text()
        return Worker.all(connection=connection)

    (worker,) = _until(registered, 120, "the remote worker's registration")
    assert worker.name == "remote-worker"
    # it reached Redis from the namespace's end of the link
    assert worker.ip_address.rsplit(":", 1)[0] == link.remote_ip, worker.ip_address

    settings = Settings(redis_url=redis_on_link, job_wait_seconds=60)
    app.dependency_overrides[get_settings] = lambda: settings
    try:
        with TestClient(app) as api:
            campaign = labeled_design(api, "remote")
            _until(
                lambda: api.get(f"/campaigns/{campaign}").json()["model_version"],
                120,
                f"a model (worker log:\n{log.read_text()})",
            )
            model = api.get(f"/campaigns/{campaign}/model")
            assert model.status_code == 200, model.text
            assert "max_rhat" in model.json()["diagnostics"], model.json()["diagnostics"]
    finally:
        app.dependency_overrides.clear()
    # RQ's records of the refits: all run by the worker in the namespace
    finished = FinishedJobRegistry(REFIT, connection=connection).get_job_ids()
    jobs = [fetch_job(job_id, connection) for job_id in finished]
    assert any(job.func_name == "fbgp_al.service.jobs.refit" for job in jobs), [
        j.func_name for j in jobs
    ]
    assert {job.worker_name for job in jobs} == {"remote-worker"}


def test_a_worker_without_the_password_is_refused(link, redis_on_link, tmp_path):
    connection = Redis.from_url(redis_on_link)
    without = redis_on_link.replace(f":{PASSWORD}@", "")
    wrong = redis_on_link.replace(PASSWORD, "not-" + PASSWORD)
    logs = {name: tmp_path / f"{name}.log" for name in ("no-password", "wrong-password")}
    processes = {
        "no-password": link.start_worker(without, "no-password", logs["no-password"]),
        "wrong-password": link.start_worker(wrong, "wrong-password", logs["wrong-password"]),
    }
    for name, log in logs.items():  # it says why, or gives up
        _until(
            lambda log=log, name=name: (
                REFUSED.search(log.read_text()) or processes[name].poll() is not None
            ),
            120,
            f"{name} refused",
        )
    time.sleep(3.0)  # and tries again, in vain
    assert Worker.all(connection=connection) == []
    for log in logs.values():
        assert REFUSED.search(log.read_text()), log.read_text()
