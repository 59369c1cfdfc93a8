"""Stacks of real processes (redis-server with its append-only file, RQ workers, the API) that a
test owns and may kill: each on free loopback ports, stopped afterwards."""

import time

import httpx
import numpy as np
import pytest

from fbgp_al.clients.ops.stack import LocalStack, fbgp_env


@pytest.fixture
def make_stack(tmp_path):
    """``make_stack(workers=2, light=True, **env)`` starts a stack; ``env`` adds ``FBGP_*``
    settings; ``light=False``: every worker serves every queue."""
    stacks = []

    def make(workers: int = 1, light: bool = True, **settings) -> LocalStack:
        env = fbgp_env(**settings)
        stack = LocalStack(tmp_path / f"stack-{len(stacks)}", workers=workers, env=env, light=light)
        stacks.append(stack)
        return stack.start()

    yield make
    for stack in stacks:
        stack.stop()


def wait_for(predicate, seconds: float = 120.0, every: float = 0.1):
    """The first true value of ``predicate()`` (errors count as false) within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except (httpx.HTTPError, KeyError, ValueError):
            value = None
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"not within {seconds:.0f} s")


def slow_campaign(api: httpx.Client, n: int = 40, **changes) -> tuple[str, list, list]:
    """A 2-D campaign whose refits take seconds (one long chain), with ``n`` labels imported:
    its first refit starts at once. Returns the id and the imported data."""
    body = {
        "name": "slow",
        "inputs": [{"name": "a", "lower": 0, "upper": 1}, {"name": "b", "lower": 0, "upper": 1}],
        "pool": {"type": "grid", "points_per_dim": 30},
        "initial_design": {"type": "maximin-lhs", "size": 3},
        "max_labels": 200,
        "mcmc": {"chains": 1, "warmup": 2000, "samples": 2000, "thinning": 20},
        "seed": 3,
    }
    body.update(changes)
    r = api.post("/campaigns", json=body)
    assert r.status_code == 201, r.text
    campaign = r.json()["id"]
    rng = np.random.default_rng(7)
    x = rng.random((n, 2)).tolist()
    y = [float(np.sin(6 * a) + b**2 + 0.05 * rng.standard_normal()) for a, b in x]
    r = api.post(f"/campaigns/{campaign}/observations", json={"x": x, "y": y})
    assert r.status_code == 201, r.text
    return campaign, x, y
