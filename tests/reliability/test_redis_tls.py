"""Redis over TLS with a worker on another host: a redis-server that speaks TLS only
(``--tls-port``, no plain-text port) with a CA and certificates this test makes, and that asks
every client for a certificate of that CA, listens on the link's host end of a network namespace
of the test's own (the ``link`` fixture, tests/reliability/conftest.py). ``fbgp-al worker`` in
the namespace refits a campaign over ``rediss://`` with ``FBGP_REDIS_CA_FILE``,
``FBGP_REDIS_CERT_FILE`` and ``FBGP_REDIS_KEY_FILE``, while the API's long poll waits on its
pub/sub over TLS too; a plain-text client, a client that trusts another CA and one without a
certificate are refused and never register. Needs root and ``ip netns`` (skipped otherwise)."""

import re
import threading
import time

import pytest
from fastapi.testclient import TestClient
from redis import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from rq import Worker

from fbgp_al.clients.ops.stack import free_port, start_redis
from fbgp_al.clients.ops.tls import client_files, server_files
from fbgp_al.service.app import app
from fbgp_al.service.keys import WAKE_CHANNEL
from fbgp_al.service.settings import Settings, get_settings
from tests.reliability.conftest import labeled_design

pytestmark = pytest.mark.slow  # a fault test: `make test-fast` leaves it out

PASSWORD = "tls-worker-test-password-0123456"


@pytest.fixture
def tls_redis(link, tmp_path):
    """A TLS-only redis-server on the link's host end that requires the password and a client
    certificate: the ``Settings`` of a client with every file right."""
    certs = tmp_path / "certs"
    server = server_files(certs, [link.host_ip])
    client = client_files(certs, "worker")
    port = free_port()
    data = tmp_path / "redis"
    process = start_redis(
        data,
        port,
        data / "redis.log",
        password=PASSWORD,
        bind=(link.host_ip,),
        tls=server,
        client_cert=client,
    )
    link.processes.append(process)
    return Settings(
        redis_url=f"rediss://:{PASSWORD}@{link.host_ip}:{port}/0",
        redis_ca_file=str(server.ca),
        redis_cert_file=str(client.cert),
        redis_key_file=str(client.key),
        job_wait_seconds=60,
    )


def _until(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {seconds:.0f} s")


def _tls_settings(settings: Settings) -> dict:
    return {
        "redis_ca_file": settings.redis_ca_file,
        "redis_cert_file": settings.redis_cert_file,
        "redis_key_file": settings.redis_key_file,
    }


def test_a_worker_in_another_network_namespace_refits_a_campaign_over_tls(
    link, tls_redis, tmp_path
):
    connection = Redis.from_url(tls_redis.redis_url, **tls_redis.redis_options())
    log = tmp_path / "tls-worker.log"
    process = link.start_worker(tls_redis.redis_url, "tls-worker", log, **_tls_settings(tls_redis))

    def registered():
        assert process.poll() is None, log.read_text()
        return Worker.all(connection=connection)

    (worker,) = _until(registered, 120, "the TLS worker's registration")
    assert worker.ip_address.rsplit(":", 1)[0] == link.remote_ip, worker.ip_address

    app.dependency_overrides[get_settings] = lambda: tls_redis
    try:
        with TestClient(app) as api:
            campaign = labeled_design(api, "tls")
            # the fourth point needs the model: a long poll waits for it, woken over pub/sub
            polled = {}

            def long_poll():
                try:
                    polled["r"] = api.get(f"/campaigns/{campaign}/next?wait=60")
                except Exception as error:  # said below, with the worker's log
                    polled["error"] = repr(error)

            poll = threading.Thread(target=long_poll)
            poll.start()
            _until(
                lambda: connection.pubsub_numsub(WAKE_CHANNEL)[0][1] >= 1,
                30,
                "the API's wake-up listener subscribed over TLS",
            )
            poll.join(90)
            assert not poll.is_alive(), f"the long poll did not end:\n{log.read_text()}"
            assert "r" in polled, (polled.get("error"), log.read_text())
            answer = polled["r"]
            assert answer.status_code == 200, (answer.text, log.read_text())
            assert answer.json()["model_version"] == 3
            model = api.get(f"/campaigns/{campaign}/model")
            assert model.status_code == 200, model.text
    finally:
        app.dependency_overrides.clear()
    # the one worker there is, the one in the namespace, ran the jobs (RQ's counts: the refit's
    # record in its registry lives only REFIT_RESULT_TTL seconds)
    (worker,) = Worker.all(connection=connection)
    assert worker.name == "tls-worker"
    assert _until(
        lambda: Worker.find_by_key(worker.key, connection=connection).successful_job_count,
        30,
        "the worker's count of jobs done",
    )


def test_plain_text_another_ca_and_no_client_certificate_are_refused(link, tls_redis, tmp_path):
    good = Redis.from_url(tls_redis.redis_url, **tls_redis.redis_options())
    plain_url = tls_redis.redis_url.replace("rediss://", "redis://")
    other = server_files(tmp_path / "another-ca", [link.host_ip])
    wrong_ca = Settings(
        redis_url=tls_redis.redis_url,
        redis_ca_file=str(other.ca),
        redis_cert_file=tls_redis.redis_cert_file,
        redis_key_file=tls_redis.redis_key_file,
    )
    no_cert = Settings(redis_url=tls_redis.redis_url, redis_ca_file=tls_redis.redis_ca_file)
    # from this host: each refused before a command is answered
    for what, client in (
        ("plain text", Redis.from_url(plain_url, socket_timeout=5)),
        ("another CA", Redis.from_url(wrong_ca.redis_url, **wrong_ca.redis_options())),
        ("no client certificate", Redis.from_url(no_cert.redis_url, **no_cert.redis_options())),
    ):
        with pytest.raises(RedisConnectionError):
            client.ping()
            pytest.fail(f"{what}: answered")
    # workers in the namespace: each says why, keeps trying, and never registers
    logs = {name: tmp_path / f"{name}.log" for name in ("plain", "wrong-ca", "no-cert")}
    link.start_worker(plain_url, "plain", logs["plain"])
    link.start_worker(wrong_ca.redis_url, "wrong-ca", logs["wrong-ca"], **_tls_settings(wrong_ca))
    link.start_worker(no_cert.redis_url, "no-cert", logs["no-cert"], **_tls_settings(no_cert))
    said = {
        "plain": re.compile(r"Redis unreachable|Connection reset|Connection closed", re.I),
        "wrong-ca": re.compile(r"TLS certificate was not accepted.*CERTIFICATE_VERIFY_FAILED"),
        "no-cert": re.compile(r"Redis unreachable", re.I),
    }
    for name, log in logs.items():
        _until(
            lambda log=log, name=name: log.exists() and said[name].search(log.read_text()),
            120,
            f"{name} refused",
        )
    time.sleep(3.0)  # they try again, in vain
    assert Worker.all(connection=good) == []
