"""The API's HTTP server (:mod:`service.server`), over raw sockets to ``fbgp-al api`` (with either
HTTP parser): request headers sent a byte at a time are cut off after
``header_timeout_seconds``, and a request that takes long once its headers are in is not."""

import socket
import time

import httpx
import pytest

from tests.conftest import start_api, stop

HEADERS, BODY = 2.0, 2.0  # the deadlines of the API under test, in seconds
SLACK = 1.5


@pytest.fixture(scope="module", params=["httptools", "h11"])
def api(request, redis_url, worker_process, tmp_path_factory):
    """``fbgp-al api`` with short header and body deadlines, on one HTTP parser."""
    log = tmp_path_factory.mktemp("transport") / "api.log"
    process, url = start_api(
        redis_url,
        log,
        header_timeout_seconds=HEADERS,
        body_timeout_seconds=BODY,
        api_http=request.param,
    )
    yield url
    stop(process)


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def _trickle(
    sock: socket.socket, first: bytes, trickle: bytes, seconds: float
) -> tuple[float, bytes]:
    """Send ``first``, then ``trickle`` a byte every ``seconds``, until the server answers or
    closes the connection; the seconds that took after ``first``, and what came back."""
    sock.sendall(first)
    started = time.monotonic()
    sock.settimeout(seconds)
    for byte in trickle:
        try:
            answer = sock.recv(65536)
        except TimeoutError:
            try:
                sock.sendall(bytes([byte]))
            except OSError:  # reset: closed
                return time.monotonic() - started, b""
            continue
        except OSError:
            return time.monotonic() - started, b""
        return time.monotonic() - started, answer
    raise AssertionError("the server neither answered nor closed the connection")


def test_slow_headers_are_cut_off_and_slow_answers_are_not(api, make_body):
    with _connect(api) as sock:  # nothing at all
        sock.settimeout(HEADERS + SLACK + 5)
        began = time.monotonic()
        assert sock.recv(1024) == b""
        assert time.monotonic() - began < HEADERS + SLACK
    with _connect(api) as sock:  # a header a byte a second
        took, answer = _trickle(
            sock, b"GET /healthz HTTP/1.1\r\nHost: x\r\n", b"X-Slow: " + b"a" * 30, 1.0
        )
        assert answer == b"" and HEADERS - 0.5 < took < HEADERS + SLACK, took
    with _connect(api) as sock:  # the same, as the second request of a connection
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        while not answer.endswith(b'{"status":"ok"}'):
            answer += sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200")
        took, answer = _trickle(
            sock, b"G", b"ET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 30, 1.0
        )
        assert answer == b"" and took < HEADERS + SLACK, took
    # a request that takes longer once its headers are in is not cut off
    with httpx.Client(base_url=api, timeout=30) as client:
        campaign = client.post("/campaigns", json=make_body()).json()["id"]
        for _ in range(3):  # the design's points, all out: the next waits
            assert client.get(f"/campaigns/{campaign}/next").status_code == 200
        began = time.monotonic()
        waited = client.get(f"/campaigns/{campaign}/next", params={"wait": HEADERS + 1.5})
        assert waited.status_code == 202 and time.monotonic() - began > HEADERS + 1
        assert client.get(f"/campaigns/{campaign}").status_code == 200  # the same connection
        client.delete(f"/campaigns/{campaign}")


def test_an_idle_connection_outlives_the_sdk_s_and_then_closes(monkeypatch):
    """The keep-alive (``keep_alive_seconds``) reaches uvicorn, and by default it outlasts the
    time httpx keeps an idle connection: a client never sends on a connection being closed."""
    import threading

    import uvicorn

    from fbgp_al.clients.ops.stack import free_port
    from fbgp_al.service import server, settings

    assert settings.Settings().keep_alive_seconds >= 2 * httpx.Limits().keepalive_expiry
    monkeypatch.setenv("FBGP_KEEP_ALIVE_SECONDS", "1.5")
    settings.get_settings.cache_clear()

    async def ok(scope, receive, send):
        headers = [(b"content-length", b"2")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"ok"})

    port = free_port()
    running = uvicorn.Server(server.config(ok, port=port, lifespan="off"))
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    try:
        while not running.started:
            time.sleep(0.01)
        with _connect(f"http://127.0.0.1:{port}") as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = b""
            while not answer.endswith(b"ok"):
                answer += sock.recv(65536)
            began = time.monotonic()
            assert sock.recv(1024) == b""  # closed once idle for the keep-alive
            assert 1.0 < time.monotonic() - began < 1.5 + SLACK
    finally:
        running.should_exit = True
        thread.join(timeout=10)
        settings.get_settings.cache_clear()
