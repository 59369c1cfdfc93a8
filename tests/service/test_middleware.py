"""The API's middleware (:mod:`service.middleware`) on real servers: a body over the limit is 413
whether announced or streamed, a body sent a byte at a time is answered 408 after
``body_timeout_seconds`` and closed (with either HTTP parser), and a 500 says ``Connection:
close``."""

import socket
import threading
import time

import httpx
import pytest
import uvicorn
from fastapi.responses import JSONResponse

from fbgp_al.clients.ops.stack import free_port
from fbgp_al.service import errors, server
from fbgp_al.service.main import App
from fbgp_al.service.refusals import JobFailed
from tests.conftest import start_api, stop
from tests.service.conftest import LIMIT
from tests.service.conftest import admin_client as _admin
from tests.service.conftest import guarded_body as _body
from tests.service.test_server import _connect, _trickle


def test_oversized_bodies_are_413_whether_announced_or_streamed(guarded):
    url, _ = guarded
    with _admin(url) as api:
        campaign = api.post("/campaigns", json=_body()).json()["id"]
        big = b'{"x": [' + b"[1.0]," * (LIMIT // 6) + b"[1.0]]}"
        r = api.post(
            f"/campaigns/{campaign}/predict",
            content=big,
            headers={"Content-Type": "application/json"},
        )
        assert r.status_code == 413 and r.headers["content-type"] == "application/problem+json"
        assert str(LIMIT) in r.json()["detail"]

        def chunks():  # no Content-Length: the limit is enforced while reading
            yield b'{"x": ['
            for _ in range(LIMIT // 600 + 10):
                yield b"[1.0]," * 100
            yield b"[1.0]]}"

        r = api.post(
            f"/campaigns/{campaign}/predict",
            content=chunks(),
            headers={"Content-Type": "application/json"},
        )
        assert r.status_code == 413, r.text
        small = api.post(f"/campaigns/{campaign}/predict", json={"x": [[1.0]]})
        assert small.status_code == 404  # under the limit it is read: no model yet


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


def test_a_slow_body_is_answered_408_and_closed(api):
    head = (
        b"POST /campaigns HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 400\r\n\r\n"
    )
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


def test_a_large_body_is_parsed_and_answered_off_the_event_loop(monkeypatch):
    """:class:`~service.middleware.OffTheLoop`: a route's body over ``large_body_bytes`` is
    validated, and its async endpoint run, in another thread than the server's event loop; a
    small one on the loop; an invalid large body is the same 422 as a small one."""
    import threading

    from fastapi import APIRouter, FastAPI
    from fastapi.testclient import TestClient
    from pydantic import BaseModel

    from fbgp_al.service.middleware import OffTheLoop
    from fbgp_al.service.settings import get_settings

    class Points(BaseModel):
        x: list[float]

    router = APIRouter(route_class=OffTheLoop)

    @router.post("/points")
    async def points(body: Points):
        return {"thread": threading.get_ident(), "n": len(body.x)}

    @router.get("/loop")
    async def loop():
        return {"thread": threading.get_ident()}

    app = FastAPI()
    app.include_router(router)
    monkeypatch.setenv("FBGP_LARGE_BODY_BYTES", "1000")
    get_settings.cache_clear()
    try:
        with TestClient(app) as client:
            on_loop = client.get("/loop").json()["thread"]
            small = client.post("/points", json={"x": [0.5] * 10}).json()
            large = client.post("/points", json={"x": [0.5] * 1000}).json()
            bad = [client.post("/points", json={"x": [0.5] * k + ["no"]}) for k in (10, 1000)]
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
    assert small == {"thread": on_loop, "n": 10}
    assert large["n"] == 1000 and large["thread"] != on_loop
    assert [r.status_code for r in bad] == [422, 422]
    assert [e["loc"] for e in bad[0].json()["detail"]] == [["body", "x", 10]]
    assert [e["loc"] for e in bad[1].json()["detail"]] == [["body", "x", 1000]]
