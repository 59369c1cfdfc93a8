"""The API's connections, over raw sockets to ``fbgp-al api`` (with either HTTP parser): request
headers sent a byte at a time are cut off after ``header_timeout_seconds``, a body sent so is
answered 408 after ``body_timeout_seconds``, a request that takes long once its headers are in
is not cut off, and a 500 says ``Connection: close``."""

import socket
import threading
import time

import httpx
import pytest
import uvicorn
from fastapi.responses import JSONResponse

from clients.ops.stack import free_port
from service import errors, server
from service.errors import JobFailed
from service.main import App
from tests.conftest import start_api, stop

HEADERS, BODY = 2.0, 2.0  # the deadlines of the API under test, in seconds
SLACK = 1.5


@pytest.fixture(scope="module", params=["httptools", "h11"])
def api(request, redis_url, worker_process, tmp_path_factory):
    """``fbgp-al api`` with short header and body deadlines, on one HTTP parser."""
    log = tmp_path_factory.mktemp("transport") / "api.log"
    process, url = start_api(redis_url, log, header_timeout_seconds=HEADERS,
                             body_timeout_seconds=BODY, api_http=request.param)  # fmt: skip
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


def test_a_slow_body_is_answered_408_and_closed(api):
    head = (b"POST /campaigns HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 400\r\n\r\n")  # fmt: skip
    with _connect(api) as sock:
        took, answer = _trickle(sock, head, b" " * 60, 0.5)
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert BODY - 0.5 < took < BODY + SLACK, took
        sock.settimeout(5)
        try:
            while chunk := sock.recv(65536):  # the rest, then the connection ends
                answer += chunk
        except ConnectionResetError:  # it ends with a reset when a trickled byte came after the
            pass  # server's last read (TCP resets a close with unread data): ended all the same
    assert b"\r\nconnection: close\r\n" in answer.lower() and b"FBGP_BODY_TIMEOUT_SECONDS" in answer


@pytest.mark.parametrize("http", ["httptools", "h11"])
def test_a_500_says_connection_close(http):
    """A small app built as the API is (:class:`service.main.App`, its error handlers), served
    as ``fbgp-al api`` serves it: an unhandled error and a failed job each answer 500 with
    ``Connection: close``, and the connection then ends; other answers keep it open."""
    app = App()
    errors.install(app)

    @app.get("/unhandled")
    def unhandled():
        raise RuntimeError("a bug")

    @app.get("/job")
    def job():
        raise JobFailed("the job failed")

    @app.get("/ok")
    def ok():
        return JSONResponse({"ok": True})

    port = free_port()
    served = uvicorn.Server(server.config(app, port=port, http=http))
    thread = threading.Thread(target=served.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not served.started:
            assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
            time.sleep(0.05)
        for path in ("/unhandled", "/job"):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                answer = b""
                while chunk := sock.recv(65536):  # the server closes the connection
                    answer += chunk
            head = answer.split(b"\r\n\r\n")[0].lower()
            assert head.startswith(b"http/1.1 500") and b"\r\nconnection: close" in head, head
            assert b"problem+json" in head
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            r = client.get("/ok")
            assert r.status_code == 200 and "connection" not in r.headers
    finally:
        served.should_exit = True
        thread.join(timeout=10)
