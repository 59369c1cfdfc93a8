"""Each job is bounded: its work horse may map only ``job_memory_mb`` more than the worker (a job
beyond it fails cleanly, and the worker goes on serving), and its RQ timeout scales with its
work (chains x iterations and the labels for a refit, points and labels for a short job)."""

import json
import os

import httpx
import pytest
from redis import Redis

from fbgp_al.service import costs
from fbgp_al.service.queues import fetch_job
from fbgp_al.service.settings import Settings
from tests.reliability.conftest import wait_for

pytestmark = pytest.mark.slow  # a fault test: `make test-fast` leaves it out


def _one_d(api: httpx.Client) -> str:
    body = {
        "name": "bounded",
        "inputs": [{"name": "x", "lower": 0, "upper": 1}],
        "pool": {"type": "grid", "points_per_dim": 101},
        "initial_design": {"size": 3},
        "max_labels": 20,
        "mcmc": {"chains": 2, "warmup": 30, "samples": 30, "thinning": 2},
        "seed": 1,
    }
    campaign = api.post("/campaigns", json=body).json()["id"]
    r = api.post(
        f"/campaigns/{campaign}/observations",
        json={"x": [[0.1], [0.5], [0.9]], "y": [0.1, 0.5, -0.2]},
    )
    assert r.status_code == 201, r.text
    wait_for(lambda: api.get(f"/campaigns/{campaign}").json()["model_version"] == 3, 60)
    return campaign


def test_a_job_over_the_memory_bound_fails_cleanly_and_the_worker_keeps_serving(make_stack):
    """With 200 MiB per job, /evaluate on 4000 points (its joint NLML factors a 4000 x 4000
    covariance, 128 MB, and more besides) fails with a 413 that names the bound, while small
    jobs and refits go on, on the same worker."""
    stack = make_stack(workers=1, job_memory_mb=200)
    redis = Redis.from_url(stack.redis_url)
    with httpx.Client(base_url=stack.url, timeout=120) as api:
        campaign = _one_d(api)
        worker = stack.workers[0].pid
        small = api.post(
            f"/campaigns/{campaign}/evaluate", json={"x": [[0.2], [0.7]], "y": [0.3, 0.1]}
        )
        assert small.status_code == 200, small.text
        m = 4000
        x = [[i / (m - 1)] for i in range(m)]
        big = api.post(f"/campaigns/{campaign}/evaluate", json={"x": x, "y": [0.0] * m})
        assert big.status_code == 413, big.text
        assert "job_memory_mb" in big.json()["detail"]
        # the worker goes on: a prediction, and a refit on one more label
        r = api.post(f"/campaigns/{campaign}/predict", json={"x": [[0.3]]})
        assert r.status_code == 200, r.text
        r = api.post(f"/campaigns/{campaign}/observations", json={"x": [[0.3]], "y": [0.2]})
        assert r.status_code == 201, r.text
        wait_for(lambda: api.get(f"/campaigns/{campaign}").json()["model_version"] == 4, 60)
        assert stack.workers[0].pid == worker and stack.workers[0].poll() is None
        os.kill(worker, 0)
        # the refit's RQ timeout is the one its work gives
        job = redis.hget(f"fbgp:c:{campaign}:state", "refit_job").decode()
        spec = json.loads(redis.get(f"fbgp:c:{campaign}:spec"))
        assert fetch_job(job, redis).timeout == costs.refit_timeout(spec, 4, Settings())


def test_job_timeouts_scale_with_the_work():
    settings = Settings()
    mcmc = {"chains": 2, "warmup": 100, "samples": 100, "thinning": 1, "draws": None}

    one = [{"name": "x", "lower": 0.0, "upper": 1.0}]

    def refit(n: int = 10, inputs=one, **changes) -> int:
        spec = {"inputs": inputs, "mcmc": dict(mcmc, **changes)}
        return costs.refit_timeout(spec, n, settings)

    base = refit()
    assert refit(chains=8) > base and refit(warmup=1000) > base and refit(samples=1000) > base
    six = [{"name": f"x{i}", "lower": 0.0, "upper": 1.0} for i in range(6)]
    assert refit(inputs=six) == base  # up to 6 features: the work of the paper's problems
    assert refit(inputs=[{"name": "m", "type": "choice", "values": list(range(60))}]) > base
    assert refit(n=500) > refit(n=100) > base
    # sampling to a target: up to max_samples per chain
    assert refit(draws=100, max_samples=5000) > refit(draws=100, max_samples=500)
    longest = refit(chains=32, warmup=10_000, samples=10_000, n=2000)
    assert longest == settings.job_timeout_max_seconds
    short = costs.short_timeout
    assert short(10, 10, 120.0, settings) < short(20_000, 10, 120.0, settings) <= 120
    assert short(5_000, 10, 120.0, settings) < short(5_000, 300, 120.0, settings)
    assert short(10**7, 10, 120.0, settings) == 120  # never past the API's wait
