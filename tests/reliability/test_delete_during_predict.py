"""A campaign deleted while a large ``/predict`` of it computes: the call answers what a deleted
campaign answers (404), not a 500, and no job key of any kind is left without a TTL (a scan of
Redis once the workers are idle)."""

import threading
import time

import httpx
import numpy as np
import pytest
from redis import Redis

from fbgp_al.service.queues import HIGH, HIGH_LONG
from tests.reliability.conftest import slow_campaign, wait_for

pytestmark = pytest.mark.slow  # a fault test: `make test-fast` leaves it out

BODY = {
    "name": "predicted",
    "inputs": [{"name": "a", "lower": 0, "upper": 1}, {"name": "b", "lower": 0, "upper": 1}],
    "pool": {"type": "grid", "points_per_dim": 20},
    "initial_design": {"type": "maximin-lhs", "size": 3},
    "max_labels": 100,
    "mcmc": {"chains": 2, "warmup": 100, "samples": 200, "thinning": 1},
    "seed": 6,
}
LONG_MCMC = {"chains": 1, "warmup": 6000, "samples": 6000, "thinning": 60}


def _without_ttl(redis: Redis) -> list[str]:
    """RQ's keys of jobs (their hashes, results, executions, dependents) that never expire."""
    found = []
    for pattern in ("rq:job:*", "rq:results:*", "rq:execution*"):
        found += [k.decode() for k in redis.scan_iter(pattern) if redis.ttl(k) == -1]
    return found


@pytest.mark.parametrize("when", ["running", "queued"])
def test_a_campaign_deleted_during_a_large_predict_answers_404_and_leaves_no_job(make_stack, when):
    stack = make_stack(workers=1)
    redis = Redis.from_url(stack.redis_url)
    rng = np.random.default_rng(len(when))
    with httpx.Client(base_url=stack.url, timeout=120) as api:
        campaign = api.post("/campaigns", json=BODY).json()["id"]
        x = rng.random((30, 2)).tolist()
        y = [float(np.sin(6 * a) + b) for a, b in x]
        assert api.post(f"/campaigns/{campaign}/observations", json={"x": x, "y": y}).is_success
        wait_for(lambda: api.get(f"/campaigns/{campaign}").json()["model_version"] == 30, 120)
        points = rng.random((60_000, 2)).round(4).tolist()
        answer = {}

        def predict():
            answer["r"] = api.post(f"/campaigns/{campaign}/predict", json={"x": points})

        if when == "queued":  # the worker busy with another campaign's long refit
            other, _, _ = slow_campaign(api, mcmc=LONG_MCMC)
            wait_for(lambda: api.get(f"/campaigns/{other}").json()["refit"] == "running", 60)
        caller = threading.Thread(target=predict)
        caller.start()
        if when == "queued":
            keys = [f"rq:queue:{name}" for name in (HIGH, HIGH_LONG)]
            wait_for(lambda: sum(redis.llen(k) for k in keys), 60, every=0.02)
        else:
            wait_for(lambda: stack.horse_of(0), 60, every=0.02)  # the predict job runs
            time.sleep(0.3)
        assert api.delete(f"/campaigns/{campaign}").status_code == 204
        caller.join(120)
        r = answer["r"]
        assert r.status_code in (404, 410), r.text
        assert r.headers["content-type"] == "application/problem+json"
        if when == "queued":
            assert api.delete(f"/campaigns/{other}").status_code == 204
    wait_for(lambda: stack.horse_of(0) is None, 60)
    time.sleep(1.0)
    assert _without_ttl(redis) == []
