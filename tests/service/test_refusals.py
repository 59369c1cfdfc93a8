"""The domain's refusals (:mod:`service.refusals`): what loads them loads no web framework, and
the API answers each with its HTTP status as problem+json (:mod:`service.errors`)."""

import subprocess
import sys

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from fbgp_al.service import errors, refusals


def test_the_store_and_the_jobs_load_no_web_framework():
    code = (
        "import sys; import fbgp_al.service.store, fbgp_al.service.refusals, "
        "fbgp_al.service.jobs, fbgp_al.service.jobs.process; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'fastapi', 'starlette'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_every_refusal_has_its_own_status():
    listed = set(errors.REFUSAL_STATUS)
    assert set(_subclasses(refusals.Refusal)) <= listed
    assert errors.refusal_status(refusals.TooLarge("x")) == 413  # not its parent's 500

    class Unlisted(refusals.Conflict):
        pass

    assert errors.refusal_status(Unlisted("x")) == 409


@pytest.mark.parametrize(
    "refusal, status, retry",
    [
        (refusals.NotFound("no such campaign"), 404, None),
        (refusals.Gone("done"), 410, None),
        (refusals.Busy("no worker took it", retry_after=4), 503, "4"),
        (refusals.TooMany("too many calls", retry_after=1), 429, "1"),
    ],
)
def test_the_api_answers_a_refusal_as_a_problem(refusal, status, retry):
    app = FastAPI()
    errors.install(app)

    @app.get("/refuse")
    def refuse():
        raise refusal

    r = TestClient(app).get("/refuse")
    assert r.status_code == status
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["detail"] == refusal.detail and r.json()["status"] == status
    assert r.headers.get("retry-after") == retry


def test_a_value_the_vocabulary_refuses_is_unprocessable():
    with (
        pytest.raises(refusals.Unprocessable, match="outside its box"),
        refusals.unprocessable_values(),
    ):
        raise ValueError("x = 3 is outside its box")
