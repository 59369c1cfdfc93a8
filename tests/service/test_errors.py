"""Errors (:mod:`service.errors`) to clients the service should not trust: fuzzed requests
(schemathesis against our own OpenAPI document, with its default checks) find nothing, and
errors are ``application/problem+json`` with a message a person can act on."""

import subprocess
import sys
from pathlib import Path

import httpx

from tests.conftest import ROOT
from tests.service.conftest import ADMIN
from tests.service.conftest import admin_client as _admin
from tests.service.conftest import guarded_body as _body


def test_schemathesis_finds_nothing(guarded, tmp_path):
    url, _ = guarded
    st = Path(sys.executable).parent / "st"
    command = [
        str(st),
        "run",
        f"{url}/openapi.json",
        "-H",
        f"Authorization: Bearer {ADMIN}",
        "--max-examples",
        "12",
        "--seed",
        "1",
        # no examples kept from earlier runs: each run is the seed's, as on a fresh clone
        "--generation-database",
        "none",
        "--no-color",
        # one worker: with two threads, hypothesis's lambda descriptions (ast.parse) race on
        # CPython 3.11.7 and schemathesis reports a runtime error of its own
        "--workers",
        "1",
        # 503 by design: no worker serves db 1
        "--exclude-path",
        "/readyz",
    ]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-6000:]
    assert "generated" in out and " failed" not in out.split("Test cases:")[-1], out[-3000:]


def test_errors_are_problem_json_with_a_message(guarded):
    url, _ = guarded
    with _admin(url) as api:
        cases = [
            api.get("/campaigns/nope"),
            api.post("/campaigns", json=_body(acquisition="ucb")),
            api.post(
                "/campaigns", content=b"\xff\xfe{", headers={"Content-Type": "application/json"}
            ),
            api.request("PATCH", "/campaigns"),
            httpx.get(f"{url}/campaigns"),
        ]
        for r in cases:
            assert 400 <= r.status_code < 500, r.text
            assert r.headers["content-type"] == "application/problem+json", r.headers
            body = r.json()
            assert body["status"] == r.status_code and body["title"] and len(body["detail"]) > 5
        assert cases[3].status_code == 405 and cases[3].headers["Allow"] == "GET, POST"
        assert cases[4].status_code == 401 and cases[4].headers["WWW-Authenticate"]
