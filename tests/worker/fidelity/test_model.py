"""The autoregressive multi-fidelity GP (:mod:`worker.fidelity.model`) against independent
computations: the model's recursion written separately in numpy (``dense.py``), Emukit's
linear multi-fidelity model (its answers stored by ``tests/data/write_emukit_mf.py``), the
single-fidelity potential (one level is that GP), scipy's Normal densities, torch's autograd and
finite differences."""

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats

from fbgp_al.worker.fidelity.model import Conditioned, Layout, Potential, covariance, sample
from fbgp_al.worker.potential import GPPotential
from tests.worker.fidelity import dense

EMUKIT = Path(__file__).parents[2] / "data" / "emukit_mf.json"
D = torch.float64


def _runs(levels: int, per_level: int, d: int, seed: int):
    """Runs not nested: each level's points drawn on their own."""
    rng = np.random.default_rng(seed)
    u = rng.random((levels * per_level, d))
    return u, np.repeat(np.arange(levels), per_level), rng.standard_normal(levels * per_level)


def _hyperparameters(levels: int, d: int, seed: int):
    rng = np.random.default_rng([seed, 1])
    ell = rng.uniform(0.2, 0.8, (levels, d))
    v = np.r_[1.0, rng.uniform(0.1, 0.5, levels - 1)]
    return ell, v, rng.uniform(-1.5, 1.5, levels - 1), rng.uniform(1e-3, 1e-2, levels)


def _conditioned(u, t, z, ell, v, rho, noise):
    return Conditioned(
        *(torch.as_tensor(np.asarray(a), dtype=D) for a in (u,)),
        torch.as_tensor(t),
        *(torch.as_tensor(np.asarray(a), dtype=D) for a in (z, ell, v, rho, noise)),
    )


@pytest.mark.parametrize(("levels", "seed"), [(2, 0), (3, 1), (4, 2)])
def test_predictions_equal_the_recursion_written_separately(levels, seed):
    u, t, z = _runs(levels, 6, 3, seed)
    ell, v, rho, noise = _hyperparameters(levels, 3, seed)
    g = _conditioned(u, t, z, ell, v, rho, noise)
    xs = np.random.default_rng(seed + 10).random((7, 3))
    for level in range(levels):
        mean, var = g.predict(xs, level)
        expected_mean, expected_var = dense.predict(u, t, z, xs, level, ell, v, rho, noise)
        np.testing.assert_allclose(mean.numpy(), expected_mean, rtol=0, atol=1e-8)
        np.testing.assert_allclose(var.numpy(), expected_var, rtol=0, atol=1e-8)
    K = covariance(*(torch.as_tensor(a) for a in (u, t, u, t, ell, v, rho)))
    np.testing.assert_allclose(K.numpy(), dense.matrix(u, t, u, t, ell, v, rho), atol=1e-12)


def test_predictions_equal_emukits_linear_multi_fidelity_model():
    stored = json.loads(EMUKIT.read_text())
    for case in stored["cases"]:
        noise = np.asarray(case["noise"]) + stored["diagonal_jitter"]
        g = _conditioned(
            case["u"],
            case["t"],
            case["z"],
            case["lengthscales"],
            case["variances"],
            case["rho"],
            noise,
        )
        for p in case["predictions"]:
            mean, var = g.predict(np.asarray(case["xs"]), p["level"])
            np.testing.assert_allclose(mean.numpy(), p["mean"], rtol=0, atol=1e-8)
            np.testing.assert_allclose(var.numpy(), p["var"], rtol=0, atol=1e-8)


def test_the_potential_is_the_log_posterior_by_scipy():
    levels, d = 3, 2
    u, t, z = _runs(levels, 5, d, 4)
    pot = Potential(u, t, z, levels, noise_floor=1e-6)
    theta = Layout(levels, d).prior_mean() + 0.3 * np.random.default_rng(5).standard_normal(pot.dim)
    ell, v, rho, log_noise = (a.numpy() for a in pot.layout.split(torch.as_tensor(theta)))
    K = dense.matrix(u, t, u, t, ell, v, rho) + np.diag((1e-6 + np.exp(log_noise))[t])
    expected = (
        -stats.multivariate_normal(np.zeros(len(z)), K).logpdf(z)
        - stats.norm.logpdf(theta, pot.layout.prior_mean(), pot.layout.prior_sd()).sum()
    )
    assert pot(theta[None])[0][0] == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize("levels", [2, 3])
def test_the_gradient_is_autograds_and_finite_differences(levels):
    u, t, z = _runs(levels, 5, 2, levels)
    pot = Potential(u, t, z, levels, noise_floor=1e-6)
    rng = np.random.default_rng(levels)
    theta = pot.layout.prior_mean() + 0.3 * rng.standard_normal((3, pot.dim))
    value, grad = pot(theta)
    for row, g in zip(theta, grad, strict=True):
        x = torch.tensor(row, requires_grad=True)
        (auto,) = torch.autograd.grad(pot.one(x), x)
        np.testing.assert_allclose(g, auto.numpy(), rtol=1e-9, atol=1e-9)
        h = 1e-6
        for j in range(pot.dim):
            step = np.zeros(pot.dim)
            step[j] = h
            fd = (pot(row + step)[0][0] - pot(row - step)[0][0]) / (2 * h)
            assert g[j] == pytest.approx(fd, rel=1e-5, abs=1e-6), j


def test_one_level_is_the_single_fidelity_gp():
    """With one level the model is the paper's GP: the same potential, value and gradient, as
    :class:`worker.potential.GPPotential` (the same parameters and priors)."""
    u, _, z = _runs(1, 12, 3, 7)
    theta = 0.4 * np.random.default_rng(8).standard_normal((4, 4))
    ours = Potential(u, np.zeros(12, dtype=int), z, 1, noise_floor=1e-6)(theta)
    theirs = GPPotential(u, z, noise_floor=1e-6)(theta)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-11)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-9, atol=1e-11)


def test_bad_levels_are_refused_and_a_singular_row_is_infinite():
    u, t, z = _runs(2, 4, 2, 9)
    with pytest.raises(ValueError, match="levels must lie in 0..1"):
        Potential(u, t + 1, z, 2)
    with pytest.raises(ValueError, match="one level and one label per run"):
        Potential(u, t[:-1], z, 2)
    pot = Potential(u, t, z, 2)
    bad = pot.layout.prior_mean()
    bad[0] = math.nan
    value, grad = pot(bad[None])
    assert value[0] == math.inf and not grad.any()


def forrester(x):
    return (6 * x - 2) ** 2 * np.sin(12 * x - 4)


def test_cheap_runs_teach_the_expensive_level():
    """Forrester's two levels (the low ``0.5 f + 10 (x - 0.5) - 5``): 11 cheap runs and 4
    expensive ones predict the expensive function better than the 4 expensive runs alone (RMSE
    2.97 against 4.11 here; with the noise fixed at the floor the posterior's mode gives 0.15,
    with the noise learned 1.6: 4 expensive runs leave much to the noise), with the sampler's
    diagnostics per hyperparameter."""
    xl, xh = np.linspace(0, 1, 11), np.array([0.0, 0.4, 0.6, 1.0])
    y = np.r_[0.5 * forrester(xl) + 10 * (xl - 0.5) - 5, forrester(xh)]
    m, s = y.mean(), y.std()
    u, t = np.r_[xl, xh][:, None], np.r_[np.zeros(11), np.ones(4)].astype(int)
    xs = np.linspace(0, 1, 101)[:, None]

    def rmse(pot, level):
        theta, report = sample(pot, chains=2, warmup=60, samples=60, seed=0)
        draws = [Conditioned.of(pot, row) for row in theta[::6]]
        mean = np.mean([g.predict(xs, level)[0].numpy() for g in draws], 0) * s + m
        return float(np.sqrt(np.mean((mean - forrester(xs[:, 0])) ** 2))), report

    both, report = rmse(Potential(u, t, (y - m) / s, 2, noise_floor=1e-6), 1)
    alone, _ = rmse(Potential(u[11:], np.zeros(4, dtype=int), (y[11:] - m) / s, 1, 1e-6), 0)
    assert set(report["rhat"]) == set(Layout(2, 1).names()) and report["divergences"] >= 0
    assert both < 0.8 * alone, (both, alone)


def test_a_warm_start_adapts_less_or_is_redone_cold_and_a_misfit_one_is_cold():
    """A refit given the previous one's adaptation starts from it: kept where its draws mix
    (then with fewer gradients than a cold start), redone cold where they do not (then its
    discarded run counted with the cold one's); whether 2 chains of 60 draws pass the
    single-fidelity rule's R-hat of 1.05 varies with the machine's arithmetic, so either
    outcome is checked for what it must show."""
    u, t, z = _runs(2, 8, 1, 12)
    pot = Potential(u, t, z, 2, noise_floor=1e-6)
    _, first = sample(pot, chains=2, warmup=60, samples=60, seed=0)
    assert first["start"] == "cold" and set(first["adaptation"]) == {
        "last",
        "step_size",
        "inverse_mass",
    }
    more = Potential(np.r_[u, [[0.5]]], np.r_[t, 1], np.r_[z, 0.3], 2, noise_floor=1e-6)
    _, cold = sample(more, chains=2, warmup=60, samples=60, seed=1)
    theta, warm = sample(more, chains=2, warmup=60, samples=60, seed=1, warm=first["adaptation"])
    assert theta.shape == (120, more.dim) and np.isfinite(theta).all()
    if warm["start"] == "warm":
        assert warm["gradient_evaluations"] < cold["gradient_evaluations"]
    else:
        assert re.fullmatch(
            r"redone cold \(R-hat [\d.]+, ESS \d+, \d+ divergences\)", warm["start"]
        ), warm["start"]
        # the cold run is the one above (same seed): the warm run's gradients come on top
        assert warm["gradient_evaluations"] > cold["gradient_evaluations"]
        np.testing.assert_array_equal(warm["adaptation"]["last"], cold["adaptation"]["last"])
    three = Potential(u, t, z, 3, noise_floor=1e-6)  # more hyperparameters: not the same layout
    _, misfit = sample(three, chains=2, warmup=20, samples=10, seed=2, warm=first["adaptation"])
    assert misfit["start"] == "cold (the previous adaptation does not fit)"
