"""Poison refits on a real stack: a refit that fails every time (out of time, here: a job
timeout of 1 s set for the stack) or whose work horse dies every time (killed) backs off, and
after ``refit_max_attempts`` failures in a row marks its campaign failed, with the reason, in
its status, its page and the metrics; a failed campaign's /next answers 409, its reads still
answer, maintenance does not run its refit again, and its owner's retry does."""

import os
import signal
import time

import httpx
import pytest
from redis import Redis

from tests.reliability.conftest import slow_campaign, wait_for

pytestmark = pytest.mark.slow  # a fault test: `make test-fast` leaves it out

# maintenance every second: an idle worker's dequeue waits worker_ttl - 15 s
# one chain of 6000 + 6000 iterations on 60 labels: a refit of about 15 s here
LONG_MCMC = {"chains": 1, "warmup": 6000, "samples": 6000, "thinning": 60}
# half as long (about 7 s): still killed well inside, a second after it began, and its last run,
# after the retry, ends sooner
DYING_MCMC = {"chains": 1, "warmup": 3000, "samples": 3000, "thinning": 30}
LABELS = 60
FAST_MAINTENANCE = {"maintenance_interval": 1, "worker_ttl": 16, "refit_backoff_seconds": 1}


def _events(api: httpx.Client, campaign: str, kind: str) -> int:
    return sum(e["event"] == kind for e in api.get(f"/campaigns/{campaign}/history").json())


def _campaign_counts(api: httpx.Client) -> dict[str, float]:
    """/metrics' campaigns by state."""
    prefix = 'fbgp_campaigns{state="'
    lines = [line for line in api.get("/metrics").text.splitlines() if line.startswith(prefix)]
    return {line[len(prefix) :].split('"')[0]: float(line.split()[-1]) for line in lines}


def _failed_campaigns(api: httpx.Client) -> float:
    return _campaign_counts(api)["failed"]


def _assert_failed_and_readable(api: httpx.Client, campaign: str, reason: str) -> dict:
    status = api.get(f"/campaigns/{campaign}").json()
    assert status["state"] == "failed" and status["refit"] == "idle", status
    assert reason in status["last_error"], status
    r = api.get(f"/campaigns/{campaign}/next")
    assert r.status_code == 409 and "failed" in r.json()["detail"], r.text
    assert _failed_campaigns(api) == 1.0
    page = api.get(f"/campaigns/{campaign}/view")
    assert page.status_code == 200 and "id='failed'" in page.text
    for read in ("observations", "history"):
        assert api.get(f"/campaigns/{campaign}/{read}").status_code == 200
    return status


def test_a_refit_that_always_fails_marks_its_campaign_failed_until_a_retry(make_stack):
    stack = make_stack(
        workers=1,
        job_timeout_seconds=1,
        refit_iteration_seconds=0,
        refit_max_attempts=3,
        **FAST_MAINTENANCE,
    )
    with httpx.Client(base_url=stack.url, timeout=30) as api:
        campaign, _, _ = slow_campaign(api, n=LABELS, mcmc=LONG_MCMC)  # each runs out of time
        began = time.monotonic()
        wait_for(lambda: api.get(f"/campaigns/{campaign}").json()["state"] == "failed", 90)
        took = time.monotonic() - began
        status = _assert_failed_and_readable(api, campaign, "failed 3 times in a row")
        assert status["refit_failures"] == 3
        assert _events(api, campaign, "refit_failed") == 3
        # out of time: RQ's timeout raised in the job (or, striking outside its refit's error
        # handling, the job ended without a result)
        errors = [
            e["error"]
            for e in api.get(f"/campaigns/{campaign}/history").json()
            if e["event"] == "refit_failed"
        ]
        assert all("JobTimeoutException" in e or "without a result" in e for e in errors), errors
        assert _events(api, campaign, "failed") == 1
        # backed off: 1 s after the first failure, 2 s after the second (and ~1 s per attempt)
        assert took > 1 + 2, took
        # maintenance (every second) does not run it again
        time.sleep(4.0)
        assert stack.horse_of(0) is None
        assert _events(api, campaign, "refit_failed") == 3
        assert api.get(f"/campaigns/{campaign}").json()["state"] == "failed"
        # the owner's retry runs it again (and, the timeout unchanged, it fails again)
        r = api.post(f"/campaigns/{campaign}/retry")
        assert r.status_code == 202 and r.json()["state"] == "active", r.text
        assert r.json()["refit"] == "queued" and r.json()["refit_failures"] == 0
        assert _failed_campaigns(api) == 0.0
        wait_for(lambda: _events(api, campaign, "refit_failed") >= 4, 30)
        wait_for(lambda: api.get(f"/campaigns/{campaign}").json()["state"] == "failed", 90)
        assert _events(api, campaign, "refit_failed") == 6
        # the counts kept by the store's scripts are exact: as counted again from scratch
        kept = _campaign_counts(api)
        assert kept == {
            "design": 0,
            "active": 0,
            "done": 0,
            "failed": 1,
            "failing": 0,
            "stalled": 0,
        }, kept
        Redis.from_url(stack.redis_url).delete("fbgp:metrics:campaigns")
        assert _campaign_counts(api) == kept
        assert api.post(f"/campaigns/{campaign}/retry").status_code == 202
        assert api.post(f"/campaigns/{campaign}/retry").status_code == 409  # not failed now
        assert _campaign_counts(api)["active"] == 1
        wait_for(lambda: api.get(f"/campaigns/{campaign}").json()["state"] == "failed", 90)
        assert api.delete(f"/campaigns/{campaign}").status_code == 204
        assert set(_campaign_counts(api).values()) == {0.0}


def test_a_refit_whose_job_always_dies_marks_its_campaign_failed(make_stack):
    stack = make_stack(workers=1, refit_max_attempts=2, **FAST_MAINTENANCE)
    redis = Redis.from_url(stack.redis_url)
    with httpx.Client(base_url=stack.url, timeout=30) as api:
        campaign, _, _ = slow_campaign(api, n=LABELS, mcmc=DYING_MCMC)
        for attempt in (1, 2):
            horse = wait_for(lambda: stack.horse_of(0), seconds=60)
            wait_for(lambda: api.get(f"/campaigns/{campaign}").json()["refit"] == "running", 30)
            time.sleep(1.0)
            os.kill(horse, signal.SIGKILL)
            wait_for(
                lambda a=attempt: (
                    (s := api.get(f"/campaigns/{campaign}").json())["refit_failures"] == a
                    or s["state"] == "failed"
                ),
                60,
            )
        status = _assert_failed_and_readable(api, campaign, "failed 2 times in a row")
        assert "ended without a result" in status["last_error"]
        assert redis.hget(f"fbgp:c:{campaign}:state", "refit_job") == b""
        time.sleep(4.0)  # maintenance does not revive it
        assert stack.horse_of(0) is None
        assert api.get(f"/campaigns/{campaign}").json()["state"] == "failed"
        assert api.get(f"/campaigns/{campaign}").json()["model_version"] is None
        r = api.post(f"/campaigns/{campaign}/retry")
        assert r.status_code == 202, r.text
        wait_for(lambda: stack.horse_of(0), seconds=30)  # it runs again
        wait_for(lambda: api.get(f"/campaigns/{campaign}").json()["model_version"] == LABELS, 120)
        assert api.get(f"/campaigns/{campaign}").json()["state"] == "active"
