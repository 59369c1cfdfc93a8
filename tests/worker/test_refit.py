"""A refit on awkward data gives finite draws, a mode, a ranking and answers, never NaN."""

import math

import numpy as np
import pytest

from worker import answers, refit
from worker.design import GridPool

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
    model, ranking = refit.fit(SPEC, GridPool(dim=1, points_per_dim=51), labels, exclude=set())
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
