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
