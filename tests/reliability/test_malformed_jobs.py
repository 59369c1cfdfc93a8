"""Job hashes that RQ cannot read, put in a queue by whoever can write to Redis: a ``status`` RQ
does not know, a ``timeout`` that is not a number, ``dependency_ids`` that are not JSON. RQ
raises out of its work loop on each, which quit it (and the worker said it had lost Redis, and
registered again): the worker fails each, says why in its log, and goes on to refit the next
campaign, the same worker, never restarted."""

import time

import httpx
import pytest
from redis import Redis
from rq import Queue
from rq.serializers import JSONSerializer

from fbgp_al.service.queues import HIGH, workers
from tests.reliability.conftest import wait_for

pytestmark = pytest.mark.slow  # a fault test: `make test-fast` leaves it out

MALFORMED = {"status": "bogus", "timeout": "soon", "dependency_ids": "[not json"}


def test_a_malformed_job_hash_fails_that_job_and_the_worker_goes_on(make_stack):
    stack = make_stack(workers=1)
    redis = Redis.from_url(stack.redis_url)
    before = [(w.name, w.pid) for w in workers(redis)]
    high = Queue(HIGH, connection=redis, serializer=JSONSerializer)
    jobs = {}
    for field, value in MALFORMED.items():
        job = high.create_job("fbgp_al.service.jobs.predict", args=["nobody", [[1.0]]])
        job.save()
        redis.hset(job.key, field, value)
        redis.rpush(high.key, job.id)
        jobs[field] = job.id
    for job_id in jobs.values():
        wait_for(lambda j=job_id: redis.hget(f"rq:job:{j}", "status") == b"failed", 60)
        assert redis.ttl(f"rq:job:{job_id}") > 0  # kept a while, not for ever
    log = (stack.data_dir / "worker-0.log").read_text()
    lines = [line for line in log.splitlines() if "malformed" in line]
    for field, job_id in jobs.items():  # each named, with what was wrong with it
        said = [line for line in lines if job_id in line and f"{field}=" in line]
        assert said, (field, lines)
    assert any("JSONDecodeError" in line for line in lines), lines
    # the next campaign's refit, by the same worker, never restarted
    with httpx.Client(base_url=stack.url, timeout=30) as api:
        body = {
            "name": "after",
            "inputs": [{"name": "x", "lower": 0.5, "upper": 2.5}],
            "pool": {"type": "grid", "points_per_dim": 51},
            "initial_design": {"type": "maximin-lhs", "size": 3},
            "max_labels": 10,
            "mcmc": {"chains": 1, "warmup": 20, "samples": 10, "thinning": 2},
            "seed": 5,
        }
        campaign = api.post("/campaigns", json=body).json()["id"]
        x, y = [[0.6], [1.1], [1.7], [2.3]], [0.1, -0.2, 0.5, 2.0]
        assert api.post(f"/campaigns/{campaign}/observations", json={"x": x, "y": y}).is_success
        wait_for(lambda: api.get(f"/campaigns/{campaign}").json()["model_version"] == 4, 120)
    time.sleep(0.5)
    log = (stack.data_dir / "worker-0.log").read_text()
    assert "starting again" not in log and "unhandled exception" not in log
    assert [(w.name, w.pid) for w in workers(redis)] == before
    assert stack.workers[0].poll() is None
