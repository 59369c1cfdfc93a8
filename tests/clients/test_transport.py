"""The client's transport (:mod:`clients.transport`) against a real HTTP server that answers
from a script: an idempotent call is retried after a 503 or 429 with Retry-After, within its
tries and the longest wait; any other call is not; a server that is not there is tried again
only for an idempotent call; a non-2xx answer is raised with the server's detail."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from fbgp_al.clients import transport
from fbgp_al.clients.errors import ApiError
from fbgp_al.clients.ops.stack import free_port


class Script:
    """A server whose answers to the calls are ``answers``, in order (the last one again);
    status 0 hangs up without one."""

    def __init__(self, answers: list[tuple[int, dict, str]]):
        self.answers, self.calls = answers, []
        script = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                script.calls.append((self.command, self.path))
                status, headers, body = script.answers[min(len(script.calls), len(answers)) - 1]
                if status == 0:  # hang up: the request was sent, no answer comes
                    self.close_connection = True
                    return
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())

            do_GET = do_POST = _answer

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        host, port = self.server.server_address
        self.http = httpx.Client(base_url=f"http://{host}:{port}", timeout=10)
        return self

    def __exit__(self, *exc):
        self.http.close()
        self.server.shutdown()
        self.server.server_close()


BUSY = (503, {"Retry-After": "0"}, json.dumps({"detail": "every worker is busy"}))
FULL = (429, {"Retry-After": "0"}, json.dumps({"detail": "too many model calls"}))
OK = (200, {"Content-Type": "application/json"}, json.dumps({"ok": True}))


@pytest.fixture
def waits(monkeypatch):
    """The waits between tries, recorded (and not waited)."""
    out = []
    monkeypatch.setattr(transport.time, "sleep", out.append)
    return out


def test_an_idempotent_call_is_retried_after_busy_answers(waits):
    with Script([BUSY, FULL, OK]) as server:
        response = transport.call(server.http, "GET", "/x", retries=3, backoff=0.01)
    assert response.json() == {"ok": True} and len(server.calls) == 3 and len(waits) == 2


def test_a_call_that_is_not_idempotent_is_not_retried_and_its_detail_is_raised(waits):
    with Script([BUSY, OK]) as server, pytest.raises(ApiError) as error:
        transport.call(server.http, "POST", "/x", idempotent=False, retries=3, backoff=0.01)
    assert error.value.status_code == 503 and error.value.detail == "every worker is busy"
    assert server.calls == [("POST", "/x")] and waits == []


def test_the_tries_end_with_the_last_answer_and_a_long_retry_after_is_capped(waits):
    long = (503, {"Retry-After": "3600"}, "no JSON here")
    with Script([long]) as server:
        response = transport.send(
            server.http, "GET", "/x", idempotent=True, retries=2, backoff=0.01
        )
    assert response.status_code == 503 and len(server.calls) == 3
    limit = transport.LONGEST_RETRY_AFTER
    assert len(waits) == 2 and all(limit <= w <= 1.25 * limit for w in waits)
    assert transport.answer_detail(response) == ("no JSON here", "no JSON here")


def test_a_server_that_is_not_there_is_tried_again_after_growing_waits(waits):
    with httpx.Client(base_url=f"http://127.0.0.1:{free_port()}", timeout=5) as http:
        with pytest.raises(httpx.ConnectError):
            transport.send(http, "GET", "/x", idempotent=True, retries=3, backoff=1.0)
        # backoff * 2**k, capped at 5, each up to a quarter longer
        assert len(waits) == 3
        for k, wait in enumerate(waits):
            assert min(5.0, 2**k) <= wait <= 1.25 * min(5.0, 2**k)
        with pytest.raises(httpx.ConnectError):  # never sent: safe to retry, and retried
            transport.send(http, "POST", "/x", idempotent=False, retries=1, backoff=1.0)
    assert len(waits) == 4


def test_a_call_sent_and_unanswered_is_retried_only_if_idempotent(waits):
    hang_up = (0, {}, "")
    with Script([hang_up, OK]) as server:
        assert transport.call(server.http, "GET", "/x", retries=1, backoff=0.01).json()
        assert len(server.calls) == 2
    with Script([hang_up, OK]) as server:
        with pytest.raises(httpx.RemoteProtocolError):
            transport.send(server.http, "POST", "/x", idempotent=False, retries=3, backoff=0.01)
        assert len(server.calls) == 1


def test_a_detail_that_is_no_text_is_read_as_text():
    response = httpx.Response(422, json={"detail": [{"loc": ["body"], "msg": "bad"}]})
    detail, body = transport.answer_detail(response)
    assert detail == "[{'loc': ['body'], 'msg': 'bad'}]" and body == response.json()
    assert transport.answer_detail(httpx.Response(500, json=[1, 2])) == ("[1, 2]", [1, 2])
    for _ in range(100):
        assert 2.0 <= transport.jittered(2.0) <= 2.5
