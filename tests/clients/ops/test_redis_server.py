"""The product's own redis-server (:mod:`clients.ops.redis_server`) with TLS, on loopback (no
network namespace needed; tests/reliability/test_redis_tls.py runs a worker across one): TLS
alone, no plain-text port; the password still required; a client certificate required where
asked for."""

import pytest
from redis import Redis
from redis.exceptions import AuthenticationError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError

from fbgp_al.clients.ops.redis_server import free_port, start_redis, tls_options
from fbgp_al.clients.ops.tls import client_files, server_files

PASSWORD = "redis-server-test-password-0123"


def _start(tmp_path, client_cert: bool):
    tls = server_files(tmp_path / "tls", ["127.0.0.1"])
    client = client_files(tmp_path / "tls", "client") if client_cert else None
    port = free_port()
    data = tmp_path / "data"
    process = start_redis(
        data, port, data / "redis.log", password=PASSWORD, tls=tls, client_cert=client
    )
    return process, port, tls, client


@pytest.mark.parametrize("client_cert", [False, True], ids=["password", "password-and-cert"])
def test_redis_with_tls_speaks_it_alone_and_still_requires_the_password(tmp_path, client_cert):
    process, port, tls, client = _start(tmp_path, client_cert)
    url = f"rediss://:{PASSWORD}@127.0.0.1:{port}/0"
    try:
        assert Redis.from_url(url, **tls_options(tls, client)).ping()
        with pytest.raises(RedisConnectionError):  # plain text on the TLS port
            Redis.from_url(url.replace("rediss://", "redis://"), socket_timeout=5).ping()
        wrong = url.replace(PASSWORD, "not-" + PASSWORD)
        with pytest.raises((AuthenticationError, ResponseError)):
            Redis.from_url(wrong, **tls_options(tls, client)).ping()
        if client_cert:
            with pytest.raises(RedisConnectionError):  # no certificate shown
                Redis.from_url(url, **tls_options(tls)).ping()
    finally:
        process.terminate()
        process.wait(timeout=30)
