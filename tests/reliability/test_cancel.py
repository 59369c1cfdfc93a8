"""A campaign deleted in the middle of a long refit, on a real stack: its jobs (the refit, its
chain groups, its merge) are stopped within seconds, the workers serve another campaign at
once, and no key of the deleted campaign is left."""

import time

import httpx
import pytest
from redis import Redis

from fbgp_al.service.queues import LONG, fetch_job, queue
from tests.reliability.conftest import slow_campaign, wait_for

pytestmark = pytest.mark.slow  # a fault test: `make test-fast` leaves it out

# one chain per worker of 6000 + 6000 iterations on 150 labels: the whole refit takes 34 s on
# this stack when nothing stops it
LONG_MCMC = {"chains": 2, "warmup": 6000, "samples": 6000, "thinning": 60}
LABELS = 150


def test_a_delete_stops_the_campaigns_running_jobs_and_frees_the_workers(make_stack):
    stack = make_stack(workers=2, light=False)  # both workers take the long refit's chains
    redis = Redis.from_url(stack.redis_url)
    with httpx.Client(base_url=stack.url, timeout=30) as api:
        campaign, _, _ = slow_campaign(api, n=LABELS, mcmc=LONG_MCMC)
        wait_for(lambda: api.get(f"/campaigns/{campaign}").json()["refit"] == "running", 60)
        time.sleep(3.0)  # the chains well under way on both workers
        busy = [k for k in range(2) if stack.horse_of(k)]
        assert busy, "no work horse runs the refit"
        refit = queue(LONG, redis)  # 150 labels: a long refit
        jobs = refit.started_job_registry.get_job_ids() + refit.deferred_job_registry.get_job_ids()
        assert jobs
        deleted = time.monotonic()
        assert api.delete(f"/campaigns/{campaign}").status_code == 204
        wait_for(lambda: not any(stack.horse_of(k) for k in range(2)), seconds=10, every=0.05)
        freed = time.monotonic() - deleted
        assert freed < 5.0, freed
        statuses = {fetch_job(j, redis).get_status() for j in jobs}
        assert statuses <= {"stopped", "canceled", "finished"}, statuses
        assert statuses & {"stopped", "canceled"}, statuses
        assert list(redis.scan_iter(f"fbgp:c:{campaign}*")) == []
        # the workers are free: another campaign's refit runs at once
        other = api.post(
            "/campaigns",
            json={
                "name": "next",
                "inputs": [{"name": "x", "lower": 0, "upper": 1}],
                "pool": {"type": "grid", "points_per_dim": 51},
                "max_labels": 10,
                "seed": 2,
                "initial_design": {"size": 3},
                "mcmc": {"chains": 2, "warmup": 30, "samples": 30, "thinning": 2},
            },
        ).json()["id"]
        r = api.post(
            f"/campaigns/{other}/observations",
            json={"x": [[0.1], [0.5], [0.9]], "y": [0.3, -0.2, 0.8]},
        )
        assert r.status_code == 201, r.text
        wait_for(lambda: api.get(f"/campaigns/{other}").json()["model_version"] == 3, 20)
        assert time.monotonic() - deleted < 20
        assert list(redis.scan_iter(f"fbgp:c:{campaign}*")) == []
    print(f"workers free {freed:.2f} s after the delete; jobs {sorted(statuses)}")
