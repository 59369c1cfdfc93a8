"""The SDK with known noise, over real HTTP: labels with their noise variance or replicates,
imports, observations and evaluations with noise, and run_simulator's returns."""

import math

import numpy as np
import pytest

from clients.client import ApiError, FbgpClient
from clients.runner import label_of, run_simulator
from clients.simulators import get_simulator

FAST = {"chains": 2, "warmup": 30, "samples": 20, "thinning": 2}


def _body(**changes) -> dict:
    sim = get_simulator("motorcycle")
    body = {"name": "known-noise", "inputs": sim.inputs(), "pool": sim.pool, "max_labels": 8,
            "mcmc": FAST, "seed": 2, "noise": {"type": "known"}}  # fmt: skip
    return dict(body, **changes)


@pytest.fixture
def api(api_url):
    with FbgpClient(api_url, token="") as client:
        yield client


def test_label_of_reads_what_a_simulator_returns():
    assert label_of(1.5) == {"y": 1.5}
    assert label_of(np.float64(2.0)) == {"y": 2.0}
    assert label_of((1.0, 0.25)) == {"y": 1.0, "noise": 0.25}
    assert label_of({"y": 1.0, "noise": 0.5}) == {"y": 1.0, "noise": 0.5}
    assert label_of({"y": 1.0}) == {"y": 1.0}
    assert label_of({"y_replicates": [1.0, 2.0]}) == {"replicates": [1.0, 2.0]}
    for bad in ((1.0, 2.0, 3.0), {"y": 1.0, "sd": 2.0}, {"noise": 1.0}, (1.0, -0.5),
                (1.0, math.nan), {"y_replicates": [1.0, 2.0], "y": 1.5}, math.inf):  # fmt: skip
        with pytest.raises(ValueError):
            label_of(bad)


def test_a_known_noise_campaign_through_the_sdk(api, api_url):
    sim = get_simulator("motorcycle")
    campaign = api.create_campaign(_body())
    assert campaign.spec["noise"] == {"type": "known", "nugget": True}
    point = api.next_point(campaign.id)
    with pytest.raises(ApiError) as missing:
        api.label(campaign.id, point.ticket, 1.0)
    assert missing.value.status_code == 422
    result = api.label(campaign.id, point.ticket, replicates=[1.0, 1.4, 0.9])
    assert result.created and result.y == pytest.approx(1.1)
    assert result.noise == pytest.approx(np.var([1.0, 1.4, 0.9], ddof=1) / 3)
    assert not api.label(campaign.id, point.ticket, replicates=[1.0, 1.4, 0.9]).created

    rng = np.random.default_rng(0)
    returns = iter(["pair", "dict", "replicates"])

    def f(x):
        sd = float(sim.noise_std(np.array([x]))[0])
        y = float(sim.mean(np.array([x]))[0]) + sd * rng.standard_normal()
        kind = next(returns)
        if kind == "pair":
            return y, sd**2
        if kind == "dict":
            return {"y": y, "noise": sd**2}
        return {"y_replicates": list(y + sd * rng.standard_normal(3))}

    seen = []
    posted = run_simulator(api_url, campaign.id, f, token="", wait=10, max_labels=3,
                           on_label=lambda x, y, n: seen.append((y, n)))  # fmt: skip
    assert posted == 3 and [n for _, n in seen] == [2, 3, 4]
    n = api.import_observations(campaign.id, [[10.0], [50.0]], [0.1, -0.2], noise=[0.01, 0.3])
    assert n == 6
    observed = api.observations(campaign.id)
    assert len(observed.noise) == 6 and observed.noise[0] == pytest.approx(result.noise)
    assert observed.noise[4:] == [0.01, 0.3] and all(v > 0 for v in observed.noise)
    assert '"noise"' in api.observations_csv(campaign.id).splitlines()[0].split(",")
    api.wait_for_model(campaign.id, 6, timeout=120)
    x = [[20.0], [60.0]]
    y = [float(v) for v in sim.mean(np.array(x))]
    noise = [float(v) ** 2 for v in sim.noise_std(np.array(x))]
    with_noise = api.evaluate(campaign.id, x, y, noise=noise)
    without = api.evaluate(campaign.id, x, y)
    assert math.isfinite(with_noise.nlml) and with_noise.nlml != without.nlml
