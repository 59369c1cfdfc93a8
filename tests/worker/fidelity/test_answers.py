"""What a stored multi-fidelity model answers (:mod:`worker.fidelity.answers`): predictions at
each point's level (the mixture the mean of the draws' predictions, the mode the draw of the
highest posterior density), and the top level's metrics on a test set, against the predictions
they are made of."""

import math

import numpy as np
import pytest

from fbgp_al.worker import fitting
from fbgp_al.worker.fidelity import answers
from fbgp_al.worker.fitting import fidelity
from tests.worker.fitting.test_fidelity import campaign, forrester


@pytest.fixture(scope="module")
def fitted():
    spec, pool, labels, design = campaign()
    model, _ = fitting.fit(spec, pool, labels, design)
    return spec, model, labels


def test_predictions_at_each_level_are_the_draws_mixture(fitted):
    spec, model, labels = fitted
    x = [[0.1, "coarse"], [0.1, "fine"], [0.8, "fine"]]
    got = answers.predict(spec, model, labels, x)
    assert got["fidelity"] == ["coarse", "fine", "fine"]
    draws, data, mode = fidelity.model_draws(spec, model, labels)
    s = data.scale_y
    for k, (point, level) in enumerate([(0.1, 0), (0.1, 1), (0.8, 1)]):
        means = [float(g.predict([[point]], level)[0][0]) for g in draws]
        expected = s.mean + s.std * np.mean(means)
        assert got["mixture_mean"][k] == pytest.approx(expected, rel=1e-9)
        mean, var = mode.predict([[point]], level)
        assert got["mean"][k] == pytest.approx(s.mean + s.std * float(mean[0]), rel=1e-9)
        assert got["variance"][k] == pytest.approx(s.std**2 * float(var[0] + mode.noise[level]))
    assert got["mixture_mean"][0] != pytest.approx(got["mixture_mean"][1], rel=1e-3)


def test_metrics_are_of_the_top_level(fitted):
    spec, model, labels = fitted
    xs = np.linspace(0.05, 0.95, 7)
    y = [float(forrester(v, "fine")) for v in xs]
    got = answers.metrics(spec, model, labels, [[float(v), "fine"] for v in xs], y)
    pred = answers.predict(spec, model, labels, [[float(v), "fine"] for v in xs])
    rmse = math.sqrt(np.mean((np.array(pred["mean"]) - y) ** 2))
    assert got["rmse"] == pytest.approx(rmse, rel=1e-9)
    assert math.isfinite(got["nlml"]) and math.isfinite(got["nlpd_mixture"])
    with pytest.raises(ValueError, match="top level"):
        answers.metrics(spec, model, labels, [[0.5, "coarse"]], [1.0])


def test_sobol_indices_are_of_the_top_levels_mean(fitted):
    spec, model, labels = fitted
    got = answers.sensitivity(spec, model, labels, samples=4096)
    assert got["inputs"] == ["x"] and got["method"] == "monte-carlo"
    assert got["first"]["mean"][0] == pytest.approx(1.0, abs=0.05)  # one input: all of it
    draws, data, _ = fidelity.model_draws(spec, model, labels)
    draws = fidelity.spaced(np.array(draws, dtype=object), fidelity.SCORING_DRAWS)
    grid = np.linspace(0, 1, 4001)[:, None]
    variances = [float(g.predict(grid, 1)[0].numpy().var()) for g in draws]
    expected = np.mean(variances) * data.scale_y.std**2  # the top level's, on a fine grid
    assert got["variance"]["mean"] == pytest.approx(expected, rel=0.1)
    cheap = [float(g.predict(grid, 0)[0].numpy().var()) for g in draws]
    assert abs(np.mean(cheap) - np.mean(variances)) > 0.2 * np.mean(variances)  # not level 0's


def test_acquisition_values_of_runs_at_their_levels(fitted):
    spec, model, labels = fitted
    x = [[0.3, "coarse"], [0.3, "fine"], [0.31, "fine"]]
    ivr = answers.acquisition(spec, model, labels, x, "ivr")["values"]
    assert all(v > 0 for v in ivr) and ivr[1] != pytest.approx(ivr[0])
    qb = answers.acquisition(spec, model, labels, x, "qb-mgp")["values"]
    assert qb[0] == pytest.approx(qb[1])  # a disagreement of the top level, whatever the run's
