"""A refit on awkward data gives finite draws, a mode, a ranking and answers, never NaN."""

import math
import time

import numpy as np
import pytest
import torch
from scipy.stats import gaussian_kde

from worker import answers, fitting
from worker.mcmc import MODE_DRAWS, posterior_mode_index, sample_posterior
from worker.spec.design import GridPool
from worker.spec.space import Space

SPEC = {
    "inputs": [{"name": "x", "lower": 0.0, "upper": 10.0}],
    "pool": {"type": "grid", "points_per_dim": 51},
    "pool_subsample": 100,
    "acquisition": "qb-mgp",
    "mcmc": {"chains": 2, "warmup": 40, "samples": 20, "thinning": 2},
    "seed": 5,
}


def _labels(x, y):
    return [
        {"x": [float(a)], "y": float(b), "index": None, "ticket": None}
        for a, b in zip(x, y, strict=True)
    ]


CASES = {
    "single label": ([3.0], [1.5]),
    "duplicated inputs": ([2.0, 2.0, 2.0, 7.0, 7.0], [1.0, 1.1, 0.9, -1.0, -1.2]),
    "constant outputs": ([1.0, 4.0, 6.0, 9.0], [2.5, 2.5, 2.5, 2.5]),
    "huge output scale": ([1.0, 3.0, 5.0, 8.0], [1e12, -3e12, 5e11, 2e12]),
    "tiny output scale": ([1.0, 3.0, 5.0, 8.0], [1e-12, -3e-12, 5e-13, 2e-12]),
    "identical points and labels": ([5.0] * 6, [0.3] * 6),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_refit_on_awkward_data_is_finite(case):
    x, y = CASES[case]
    labels = _labels(x, y)
    model, ranking = fitting.fit(SPEC, GridPool(dim=1, points_per_dim=51), labels, exclude=set())
    draws = np.array(model["samples"]["lengthscale"]), np.array(model["samples"]["noise"])
    assert all(np.isfinite(d).all() and (d > 0).all() for d in draws)
    assert math.isfinite(model["mode"]["noise"]) and model["transform"]["y_std"] > 0
    assert len(ranking) == 51 and all(math.isfinite(r["score"]) for r in ranking)
    pred = answers.predict(SPEC, model, labels, [[0.0], [5.0], [10.0]])
    for key in ("mean", "variance", "mixture_mean", "mixture_variance"):
        assert all(math.isfinite(v) for v in pred[key]), (case, key)
    assert all(v > 0 for v in pred["variance"])
    ev = answers.metrics(SPEC, model, labels, [[2.0], [8.0]], [float(np.mean(y))] * 2)
    assert all(math.isfinite(ev[k]) for k in ("nlml", "rmse", "nlpd_mixture")), (case, ev)
    accuracy = model["accuracy"]
    assert all(math.isfinite(v) and v >= 0 for k, v in accuracy.items() if k != "loo_nlpd")
    assert math.isfinite(accuracy["loo_nlpd"]) and accuracy["pool_points"] == 51, (case, accuracy)


def test_the_mode_of_draws_within_the_limit_is_the_densest_of_all():
    # the paper's 1,500 draws: the KDE sees every one, as before the limit
    draws = np.random.default_rng(0).normal(size=(1500, 3)) * [0.5, 1.0, 2.0]
    densest = int(np.argmax(gaussian_kde(draws.T)(draws.T)))
    assert posterior_mode_index(draws, limit=1500) == densest
    assert posterior_mode_index(draws) == densest  # MODE_DRAWS, 5,000


def test_the_mode_of_many_draws_is_the_densest_of_a_seeded_subsample():
    draws = np.random.default_rng(1).normal([1.0, -2.0], [0.3, 0.5], size=(320_000, 2))
    started = time.perf_counter()
    index = posterior_mode_index(draws, limit=MODE_DRAWS, seed=7)
    assert time.perf_counter() - started < 60  # every draw's KDE: about 20 minutes
    assert index == posterior_mode_index(draws, limit=MODE_DRAWS, seed=7)
    assert np.abs(draws[index] - [1.0, -2.0]).max() < 0.2


def test_a_refit_takes_its_mode_from_at_most_mode_draws():
    u, z = torch.linspace(0, 1, 8, dtype=torch.float64)[:, None], torch.randn(8).double()
    post = sample_posterior(u, z, chains=2, warmup=30, samples=30, seed=0, mode_draws=10)
    again = sample_posterior(u, z, chains=2, warmup=30, samples=30, seed=0, mode_draws=10)
    log_draws = post.log_draws().numpy()
    index = posterior_mode_index(log_draws, limit=10, seed=0)
    assert torch.equal(post.mode_lengthscale, post.lengthscale[index])
    assert torch.equal(post.mode_lengthscale, again.mode_lengthscale)
    whole = sample_posterior(u, z, chains=2, warmup=30, samples=30, seed=0, mode_draws=60)
    assert torch.equal(whole.mode_lengthscale, post.lengthscale[posterior_mode_index(log_draws)])


def test_a_refit_over_typed_inputs_learns_each_choice_and_ranks_values():
    """A choice input is a one-hot block: the model predicts each value's level apart (an
    offset of 3 between solvers), its lengthscales have one column per feature, and the
    ranking names points by their values."""
    inputs = [{"name": "solver", "type": "choice", "values": ["cg", "direct"]},
              {"name": "mesh", "type": "int", "lower": 1, "upper": 5},
              {"name": "rate", "type": "log", "lower": 1e-4, "upper": 1.0}]  # fmt: skip
    spec = dict(SPEC, inputs=inputs, pool={"type": "grid", "points_per_dim": 5})
    space = Space.of(inputs)
    pool = GridPool(dim=3, points_per_dim=5, axes=space.axes(5))
    rng = np.random.default_rng(0)
    x = space.from_pool(pool.points(rng.choice(pool.size, 16, replace=False)))

    def f(p):
        return 3.0 * (p[0] == "direct") + 0.2 * p[1] + 0.3 * math.log10(p[2])

    labels = [{"x": p, "y": f(p), "index": None, "ticket": None} for p in x]
    model, ranking = fitting.fit(spec, pool, labels, exclude=set())
    assert model["features"] == ["solver=cg", "solver=direct", "mesh", "rate"]
    assert np.array(model["samples"]["lengthscale"]).shape[1] == 4
    assert all(r["x"][0] in ("cg", "direct") and type(r["x"][1]) is int for r in ranking)
    test = [["cg", 3, 0.01], ["direct", 3, 0.01], ["cg", 1, 1e-4], ["direct", 5, 1.0]]
    pred = answers.predict(spec, model, labels, test)
    np.testing.assert_allclose(pred["mean"], [f(p) for p in test], atol=0.5)
