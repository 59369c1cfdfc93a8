"""Main effects and two-input means with the other inputs averaged (:mod:`worker.effects`),
against independent computations on a fitted mixed model (a float, a log, an int and a choice
input): the mean against brute-force averages of ``/predict``'s mixture means at random points,
each draw's variance against the joint predictive covariance of the points averaged."""

import numpy as np
import pytest
import torch

from fbgp_al.worker import answers, effects, fitting
from fbgp_al.worker.vocabulary.pools import pool_of
from fbgp_al.worker.vocabulary.space import Space

SPEC = {
    "inputs": [
        {"name": "load", "lower": 0.0, "upper": 10.0},
        {"name": "gap", "type": "log", "lower": 0.01, "upper": 10.0},
        {"name": "layers", "type": "int", "lower": 1, "upper": 4},
        {"name": "alloy", "type": "choice", "values": ["steel", "al", "ti"]},
    ],
    "pool": {"type": "grid", "points_per_dim": 9},
    "pool_subsample": 200,
    "acquisition": "qb-mgp",
    "mcmc": {"chains": 2, "warmup": 40, "samples": 20, "thinning": 2},
    "seed": 3,
}


def truth(point) -> float:
    load, gap, layers, alloy = point
    k = {"steel": 2.0, "al": 1.0, "ti": 1.5}[alloy]
    return k * np.sin(load / 3.0) + 0.5 * np.log10(gap) + 0.3 * layers


@pytest.fixture(scope="module")
def fitted():
    space = Space.of(SPEC["inputs"])
    rng = np.random.default_rng(0)
    x = space.from_pool(space.stratify(rng.random((24, 4))))
    labels = [{"x": p, "y": float(truth(p)), "index": None, "ticket": None} for p in x]
    torch.manual_seed(0)
    model, _ = fitting.fit(SPEC, pool_of(SPEC), labels, exclude=set())
    return space, model, labels


def test_main_effects_mean_is_the_average_of_predictions(fitted):
    """Along each input, the curve is the mean over the draws of ``/predict``'s mixture mean
    averaged over 3,000 random points of the other inputs (uniform, independent of the
    quasi-Monte Carlo points), within 4 standard errors of that average."""
    space, model, labels = fitted
    curves = effects.main_effects(SPEC, model, labels, draws=None)
    rng = np.random.default_rng(11)
    others = space.stratify(rng.random((3000, space.dim)))
    for j, curve in enumerate(curves):
        assert curve["input"] == SPEC["inputs"][j]["name"]
        picks = range(0, len(curve["v"]), max(1, len(curve["v"]) // 3))
        for i in picks:
            v = others.copy()
            v[:, j] = curve["v"][i]
            mean = np.array(
                answers.predict(SPEC, model, labels, space.from_pool(v))["mixture_mean"]
            )
            se = mean.std(ddof=1) / np.sqrt(len(mean))
            assert abs(curve["center"][i] - mean.mean()) <= 4 * se + 1e-9, (j, i, curve, se)
            assert curve["low"][i] < curve["center"][i] < curve["high"][i]
    assert [c["x"] for c in curves][3] == ["steel", "al", "ti"]
    assert curves[2]["x"] == [1, 2, 3, 4]


def test_each_draws_variance_is_the_joint_covariance_averaged(fitted):
    """One draw's mean and variance of the average over the samples are ``1^T m / S`` and
    ``1^T C 1 / S^2`` of the latent joint predictive mean ``m`` and covariance ``C`` at the
    points averaged (:func:`worker.answers._joint_predictive`), at a main effect's and a
    two-input grid's points."""
    space, model, labels = fitted
    box, scale_y, u, z, post, noise = answers._context(SPEC, model, labels)
    others = effects.other_inputs(space, 64, seed=4)
    for b in (0, 5):
        ls, s2 = post.lengthscale[b : b + 1], post.noise[b : b + 1]
        for fixed, t in (([0], [[0.3, 0, 0, 0]]), ([0, 3], [[0.7, 0, 0, 0.5]])):
            t = np.array(t)
            ((means, variances),) = effects.averaged_views(
                space, u, z, ls, s2, noise, [(fixed, t)], others
            )
            v = others.copy()
            v[:, fixed] = t[0, fixed]
            cand = torch.as_tensor(space.features(v))
            mean, cov = answers._joint_predictive(u, z, ls, s2, cand)
            cov.diagonal().sub_(s2[0])  # latent
            assert means[0, 0] == pytest.approx(float(mean.mean()), rel=1e-9, abs=1e-12)
            expected = float(cov.sum()) / len(v) ** 2
            assert variances[0, 0] == pytest.approx(expected, rel=1e-6, abs=1e-10)


def test_views_share_each_distinct_draw_s_factor_and_answer_as_each_alone(fitted, monkeypatch):
    """Several views of the same draws (the main effects, a two-input grid) factor each
    distinct draw once for all of them; a repeated draw's answer is its draw's, and each view's
    is the one it gets alone."""
    space, model, labels = fitted
    box, scale_y, u, z, post, noise = answers._context(SPEC, model, labels)
    order = [3, 1, 3, 0, 1, 3]
    ls, s2 = post.lengthscale[order], post.noise[order]
    others = effects.other_inputs(space, 32, seed=2)
    views = [([0], np.full((5, 4), 0.25)), ([1, 3], np.array([[0.4, 0.6, 0.0, 1.0]] * 2))]
    factored = []
    factorize = effects.factorize
    monkeypatch.setattr(
        effects, "factorize", lambda *a: factored.append(len(a[2])) or factorize(*a)
    )
    together = effects.averaged_views(space, u, z, ls, s2, noise, views, others)
    assert sum(factored) == 3
    for (fixed, t), (means, variances) in zip(views, together, strict=True):
        for k, b in enumerate(order):
            one = post.lengthscale[b : b + 1], post.noise[b : b + 1]
            ((m, v),) = effects.averaged_views(space, u, z, *one, noise, [(fixed, t)], others)
            assert np.allclose(means[k], m[0], rtol=1e-12, atol=1e-14)
            assert np.allclose(variances[k], v[0], rtol=1e-9, atol=1e-14)


def test_the_band_is_the_mixtures_interval():
    """Two draws far apart: the band holds both; one draw: the normal's 95% interval."""
    mean, low, high = effects.mixture_band(np.array([[0.0], [10.0]]), np.array([[1.0], [1.0]]))
    assert mean[0] == 5.0 and low[0] < 0 and high[0] > 10
    mean, low, high = effects.mixture_band(np.array([[2.0]]), np.array([[4.0]]))
    assert low[0] == pytest.approx(2 - 1.959964 * 2, abs=1e-5)
    assert high[0] == pytest.approx(2 + 1.959964 * 2, abs=1e-5)


def test_a_log_outputs_curve_is_the_geometric_mean_of_its_predictions():
    """An output modeled on the log scale: under one draw the curve is ``exp`` of the average
    of ``log`` of ``/predict``'s median (``exp`` of the latent mean of ``log y``) over random
    points of the other inputs, the geometric mean of the output, within 4 standard errors on
    the log scale; the band holds it, and everything is positive although ``log y`` is not."""
    spec = {**SPEC, "inputs": SPEC["inputs"][:2], "transform": "log"}
    space = Space.of(spec["inputs"])
    rng = np.random.default_rng(1)
    x = space.from_pool(space.stratify(rng.random((16, 2))))
    labels = [
        {
            "x": p,
            "y": float(np.exp(np.sin(p[0] / 3.0) + 0.5 * np.log10(p[1]))),
            "index": None,
            "ticket": None,
        }
        for p in x
    ]
    torch.manual_seed(0)
    model, _ = fitting.fit(spec, pool_of(spec), labels, exclude=set())
    one = {key: value[:1] for key, value in model["acquisition_samples"].items()}
    model = {**model, "acquisition_samples": one}
    (curve,) = effects.main_effects(spec, model, labels, [0])
    assert curve["geometric"] and min(curve["low"]) > 0
    others = space.stratify(np.random.default_rng(5).random((3000, 2)))
    for i in (0, 20, 45):
        v = others.copy()
        v[:, 0] = curve["v"][i]
        medians = answers.predict(spec, model, labels, space.from_pool(v))["mixture_median"]
        log_median = np.log(medians)
        se = log_median.std(ddof=1) / np.sqrt(len(log_median))
        assert abs(np.log(curve["center"][i]) - log_median.mean()) <= 4 * se + 1e-9
        assert curve["low"][i] < curve["center"][i] < curve["high"][i]
