"""Sobol indices of a GP's posterior mean (:mod:`worker.vocabulary.sobol`): the closed form against
Monte Carlo on the same mean (SALib's Saltelli estimator, a pick-freeze one of a million points),
one input's integrals against quadrature, with int and choice inputs, over the draws (the
intervals), and the Monte Carlo estimator on Ishigami's analytic indices. GPs are built with
fixed hyperparameters: no MCMC."""

import math
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import scipy.special
from SALib.analyze import sobol as salib_sobol
from SALib.sample import sobol as salib_sample

from fbgp_al.worker.vocabulary import sobol
from fbgp_al.worker.vocabulary.space import Space

ROOT = pathlib.Path(__file__).resolve().parents[3]
PI = math.pi


FLOAT_LOG = Space.of(
    [
        {"name": "a", "lower": 0, "upper": 1},
        {"name": "b", "type": "log", "lower": 1, "upper": 1000},
        {"name": "c", "lower": -5, "upper": 5},
    ]
)


MIXED = Space.of(
    [
        {"name": "a", "lower": 0, "upper": 1},
        {"name": "n", "type": "int", "lower": 1, "upper": 6},
        {"name": "alloy", "type": "choice", "values": ["steel", "ti", "al"]},
    ]
)


def _kernel(a, b, ls):
    diff = (a[:, None, :] - b[None, :, :]) / ls
    return np.exp(-0.5 * (diff**2).sum(-1))


def _draws(space, n, lengthscales, noise=1e-4, seed=0, f=None):
    """Labels' features ``u`` (``n`` random points), and each draw's ``alpha`` for labels
    ``f(v)`` (a random smooth function when None), standardized."""
    rng = np.random.default_rng(seed)
    v = sobol.sample_inputs(space, n, rng)
    u = space.features(v)
    y = (
        f(v)
        if f is not None
        else _kernel(u, rng.random((4, u.shape[1])), 0.3) @ rng.normal(size=4) + 0.3 * u[:, 0]
    )
    z = (y - y.mean()) / y.std(ddof=1)
    ls = np.atleast_2d(lengthscales)
    alpha = np.stack([np.linalg.solve(_kernel(u, u, l) + noise * np.eye(n), z) for l in ls])
    return u, alpha, ls


def test_erf_is_math_erf():
    x = np.concatenate([np.linspace(-9, 9, 20001), np.geomspace(1e-300, 5.9, 200), [0.0, -0.0]])
    assert np.abs(sobol.erf(x) - np.array([math.erf(t) for t in x])).max() <= 5e-16
    assert sobol.erf(np.array([6.0, -7.0, np.inf]))[:2].tolist() == [1.0, -1.0]
    # an array whose every value lies in (-1, 1) takes the short path, with the same answer
    inner = np.linspace(-0.999, 0.999, 2001).reshape(3, 667)
    assert np.abs(sobol.erf(inner) - np.vectorize(math.erf)(inner)).max() <= 5e-16


def test_the_closed_form_is_the_same_with_scipy_s_erf():
    """The workers integrate with ``scipy.special.erf``, the SDK with the module's own."""
    u, alpha, ls = _draws(MIXED, 30, np.full((3, 5), 0.4) * np.arange(1, 4)[:, None], seed=2)
    own = sobol.closed_form(MIXED, u, alpha, ls)
    fast = sobol.closed_form(MIXED, u, alpha, ls, erf=scipy.special.erf)
    for key in ("variance", "first", "total"):
        assert np.allclose(fast[key], own[key], rtol=1e-12, atol=1e-15)


def test_closed_form_agrees_with_salib_saltelli_within_its_confidence_interval():
    """One GP mean over a float, a log and a float input: SALib's Saltelli sample (2^14 base
    points, 81,920 evaluations) and analyzer agree with the closed form within the 95%
    confidence interval SALib gives."""
    u, alpha, ls = _draws(FLOAT_LOG, 40, [0.25, 0.6, 0.4])
    exact = sobol.closed_form(FLOAT_LOG, u, alpha, ls)
    problem = {"num_vars": 3, "names": ["a", "b", "c"], "bounds": [[0, 1]] * 3}
    points = salib_sample.sample(problem, 2**14, calc_second_order=False, seed=3)
    y = sobol.gp_mean(FLOAT_LOG, u, alpha, ls)(points)[0]
    got = salib_sobol.analyze(problem, y, calc_second_order=False, seed=4)
    for key, ours in (("S1", "first"), ("ST", "total")):
        assert np.all(np.abs(got[key] - exact[ours][0]) <= got[f"{key}_conf"]), (key, got, exact)
    assert exact["first"][0].sum() <= 1 <= exact["total"][0].sum()


def test_closed_form_agrees_with_a_million_point_pick_freeze_estimate():
    """Two draws of different lengthscales, 2^20 points (5 x 2^20 evaluations of each mean):
    every index within 4 of the estimator's standard errors, and the variance of the mean
    within 0.5%."""
    u, alpha, ls = _draws(FLOAT_LOG, 30, [[0.2, 0.5, 0.3], [0.6, 0.15, 1.5]], seed=1)
    exact = sobol.closed_form(FLOAT_LOG, u, alpha, ls)
    mc = sobol.monte_carlo(
        FLOAT_LOG, sobol.gp_mean(FLOAT_LOG, u, alpha, ls), samples=2**20, seed=5, chunk=2**16
    )
    for key in ("first", "total"):
        assert np.all(np.abs(mc[key] - exact[key]) <= 4 * mc[f"{key}_se"]), (key, mc, exact)
        assert mc[f"{key}_se"].max() < 0.01
    assert mc["variance"] == pytest.approx(exact["variance"], rel=5e-3)


def _ishigami(v, a=7.0, b=0.1):
    x = -PI + 2 * PI * v
    return np.sin(x[:, 0]) + a * np.sin(x[:, 1]) ** 2 + b * x[:, 2] ** 4 * np.sin(x[:, 0])


def test_int_and_choice_inputs_agree_with_monte_carlo_over_their_values():
    """A float, an int of 6 values and a choice of 3 (one input of 3 one-hot features): the
    closed form's sums over the values against Monte Carlo drawing the values uniformly."""
    lengthscales = [[0.3, 0.4, 0.8, 1.2, 0.5], [0.8, 0.2, 2.0, 0.6, 3.0]]
    u, alpha, ls = _draws(MIXED, 36, lengthscales, seed=2)
    assert u.shape == (36, 5)
    exact = sobol.closed_form(MIXED, u, alpha, ls)
    mc = sobol.monte_carlo(MIXED, sobol.gp_mean(MIXED, u, alpha, ls), samples=2**17, seed=6)
    for key in ("first", "total"):
        assert np.all(np.abs(mc[key] - exact[key]) <= 4 * mc[f"{key}_se"]), (key, mc, exact)
    assert mc["variance"] == pytest.approx(exact["variance"], rel=0.02)
    assert np.all(exact["first"][:, 2] > 0.02)  # the choice matters: not a vacuous check


def test_an_int_input_of_many_values_is_integrated_as_a_continuous_one():
    space = Space.of(
        [
            {"name": "n", "type": "int", "lower": 0, "upper": 5000},
            {"name": "a", "lower": 0, "upper": 1},
        ]
    )
    assert sobol._levels(space.inputs[0]) is None
    u, alpha, ls = _draws(space, 25, [0.2, 0.4], seed=3)
    exact = sobol.closed_form(space, u, alpha, ls)
    mc = sobol.monte_carlo(space, sobol.gp_mean(space, u, alpha, ls), samples=2**16, seed=7)
    for key in ("first", "total"):
        assert np.all(np.abs(mc[key] - exact[key]) <= 4 * mc[f"{key}_se"] + 1e-3)


def test_intervals_are_the_draws_quantiles_and_one_draw_has_none():
    rng = np.random.default_rng(4)
    lengthscales = np.exp(rng.normal(np.log([0.3, 0.5, 0.4]), 0.4, (12, 3)))
    u, alpha, ls = _draws(FLOAT_LOG, 30, lengthscales, seed=4)
    per_draw = sobol.closed_form(FLOAT_LOG, u, alpha, ls)
    got = sobol.summarize(per_draw, FLOAT_LOG)
    for key in ("first", "total"):
        values, band = per_draw[key], got[key]
        assert np.allclose(band["mean"], values.mean(0))
        assert np.allclose(band["low"], np.quantile(values, 0.025, axis=0))
        assert np.allclose(band["high"], np.quantile(values, 0.975, axis=0))
        assert np.all(values.min(0) <= band["low"]) and np.all(band["high"] <= values.max(0))
        assert np.all(np.array(band["high"]) - band["low"] > 0.01)  # the draws disagree
        whole = sobol.summarize(per_draw, FLOAT_LOG, level=1.0)[key]
        assert np.allclose(whole["low"], values.min(0))
        assert np.allclose(whole["high"], values.max(0))
    one = sobol.sobol_indices(FLOAT_LOG, u, alpha[:1], ls[:1])
    for key in ("first", "total"):
        assert one[key]["low"] == one[key]["mean"] == one[key]["high"]
        assert np.allclose(one[key]["mean"], per_draw[key][0])
    assert one["draws"] == 1 and one["method"] == "closed-form"


def test_chunks_of_draws_give_the_same_indices(monkeypatch):
    u, alpha, ls = _draws(MIXED, 20, np.full((5, 5), 0.5) * np.arange(1, 6)[:, None], seed=5)
    whole = sobol.closed_form(MIXED, u, alpha, ls)
    monkeypatch.setattr(sobol, "CHUNK_ELEMENTS", 1)  # one draw at a time
    for key in ("variance", "first", "total"):
        assert np.allclose(sobol.closed_form(MIXED, u, alpha, ls)[key], whole[key], rtol=1e-12)


def test_a_repeated_draw_is_integrated_once_with_its_own_indices(monkeypatch):
    """A Laplace mixture's draws repeat: each distinct one goes through the integrals once,
    and each copy gets the indices it would get on its own, in the draws' order; the Monte
    Carlo's mean too."""
    u, alpha, ls = _draws(MIXED, 20, np.full((3, 5), 0.5) * np.arange(1, 4)[:, None], seed=5)
    order = [2, 0, 2, 1, 0]
    alone = sobol.closed_form(MIXED, u, alpha, ls)
    seen = []
    chunk = sobol._chunk
    monkeypatch.setattr(
        sobol, "_chunk", lambda axes, a, l, erf: seen.append(len(l)) or chunk(axes, a, l, erf)
    )
    got = sobol.closed_form(MIXED, u, alpha[order], ls[order])
    assert sum(seen) == 3
    for key in ("variance", "first", "total"):
        assert np.array_equal(got[key], alone[key][order])
    points = sobol.sample_inputs(MIXED, 50, np.random.default_rng(1))
    means = sobol.gp_mean(MIXED, u, alpha[order], ls[order])(points)
    assert np.allclose(means, sobol.gp_mean(MIXED, u, alpha, ls)(points)[order], rtol=1e-13)


def test_a_constant_mean_has_zero_indices():
    u, alpha, ls = _draws(FLOAT_LOG, 10, [0.3, 0.3, 0.3])
    got = sobol.closed_form(FLOAT_LOG, u, 0 * alpha, ls)
    assert got["variance"].tolist() == [0.0] and not got["first"].any() and not got["total"].any()


def test_the_closed_form_needs_numpy_alone():
    """The SDK's Metamodel may call it: importing it loads no torch nor scipy."""
    code = (
        "import sys, fbgp_al.worker.vocabulary.sobol;"
        "loaded = {'torch', 'scipy'} & {m.split('.')[0] for m in sys.modules};"
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_monte_carlo_gives_ishigamis_analytic_indices_far_from_zero_too():
    """The estimator itself, on the function (not a GP): Ishigami shifted by 1e8, whose raw
    squares would cancel to nothing."""
    space = Space.of([{"name": f"x{i}", "lower": -PI, "upper": PI} for i in (1, 2, 3)])
    got = sobol.monte_carlo(space, lambda v: 1e8 + _ishigami(v), samples=2**17, seed=9)
    first, total = [0.3139, 0.4424, 0.0], [0.5576, 0.4424, 0.2437]
    assert np.all(np.abs(got["first"][0] - first) <= 4 * got["first_se"][0] + 1e-4), got
    assert np.all(np.abs(got["total"][0] - total) <= 4 * got["total_se"][0] + 1e-4), got
    assert got["variance"][0] == pytest.approx(13.845, rel=0.02)


@pytest.mark.parametrize(("lo", "hi"), [(0.0, 1.0), (-0.05, 1.05)])
def test_one_input_s_integrals_are_quadrature_s(lo, hi):
    """``e = E[k(x, a)]`` and ``W = E[k(x, a) k(x, b)]`` for ``x`` uniform on ``[lo, hi]`` (an
    int of many values: its cells' span), against scipy's adaptive quadrature."""
    from scipy import integrate

    a = np.array([0.0, 0.13, 0.5, 0.97])
    ls = np.array([0.05, 0.4, 3.0])
    e, W = sobol._interval_moments(a, ls, lo, hi)
    assert e.shape == (3, 4) and W.shape == (3, 4, 4)

    def k(x, p, ell):
        return math.exp(-0.5 * ((x - p) / ell) ** 2)

    for b, ell in enumerate(ls):
        for i, p in enumerate(a):
            mean = integrate.quad(k, lo, hi, args=(p, ell), epsabs=1e-14, points=[p])[0]
            assert e[b, i] == pytest.approx(mean / (hi - lo), abs=1e-12)
            for j, q in enumerate(a):
                both = integrate.quad(
                    lambda x, p=p, q=q, ell=ell: k(x, p, ell) * k(x, q, ell),
                    lo,
                    hi,
                    epsabs=1e-14,
                    points=[p, q],
                )[0]
                assert W[b, i, j] == pytest.approx(both / (hi - lo), abs=1e-12)


def test_a_discrete_input_s_integrals_are_means_over_its_values():
    levels = np.array([[0.0], [0.2], [0.4], [0.6], [0.8], [1.0]])
    feats = np.array([[0.2], [0.5], [1.0]])
    ls = np.array([[0.3], [2.0]])
    e, W = sobol._discrete_moments(levels, feats, ls)
    for b in range(2):
        K = np.exp(-0.5 * ((levels - feats.T) / ls[b, 0]) ** 2)  # L x n
        np.testing.assert_allclose(e[b], K.mean(0), rtol=1e-14)
        np.testing.assert_allclose(W[b], np.mean(K[:, :, None] * K[:, None, :], 0), rtol=1e-13)


def test_gp_mean_takes_fewer_points_at_once_where_their_distances_would_be_large(monkeypatch):
    """With ``CHUNK_ELEMENTS`` for 7 points of 3 draws x 30 labels at once, the means are those
    of the points taken all at once."""
    u, alpha, ls = _draws(FLOAT_LOG, 30, [[0.2, 0.5, 0.3], [0.6, 0.15, 1.5], [0.3, 0.3, 0.3]])
    points = np.random.default_rng(2).random((50, 3))
    whole = sobol.gp_mean(FLOAT_LOG, u, alpha, ls)(points)
    monkeypatch.setattr(sobol, "CHUNK_ELEMENTS", 7 * 3 * 30)
    exp, sizes = np.exp, []
    monkeypatch.setattr(np, "exp", lambda x: sizes.append(x.shape[1]) or exp(x))
    chunked = sobol.gp_mean(FLOAT_LOG, u, alpha, ls)(points)
    monkeypatch.undo()
    assert sizes == [7] * 7 + [1]
    np.testing.assert_allclose(chunked, whole, rtol=1e-13)
