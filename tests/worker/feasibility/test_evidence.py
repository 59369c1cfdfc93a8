"""The failure model's hyperparameters (:mod:`worker.feasibility.evidence`): the weak log-prior
against scipy's Normal densities, and the fitted hyperparameters a seeded, bounded local
maximum of the approximate log marginal likelihood plus that prior."""

import math

import numpy as np
import pytest
from scipy import stats

from fbgp_al.worker.feasibility.evidence import _prior, hyperparameters, log_marginal, log_prior


def _corner(n: int, seed: int):
    u = np.random.default_rng(seed).random((n, 2))
    return u, ~((u[:, 0] > 0.7) & (u[:, 1] < 0.4))


@pytest.mark.parametrize(
    ("likelihood", "shift"), [("probit", 0.0), ("logistic", 2 * math.log(1.702))]
)
def test_the_log_prior_is_the_sum_of_the_stated_normals(likelihood, shift):
    """The lengthscales LogNormal(log 0.3, 0.75), so that one failure speaks for its neighbourhood;
    the signal's and the constant mean's variances centred on a latent sd of 10 (a simulator's
    outcome is nearly fixed by its inputs), wider by 1.702 for the logistic."""
    theta = np.array([-0.4, 1.1, 0.3, 2.0])
    expected = (
        stats.norm.logpdf(theta[:2], math.log(0.3), 0.75).sum()
        + stats.norm.logpdf(theta[2], math.log(100.0) + shift, 1.5)
        + stats.norm.logpdf(theta[3], math.log(100.0) + shift, 1.5)
    )
    assert log_prior(theta, likelihood) == pytest.approx(expected, rel=1e-12)


def test_a_choice_inputs_one_hot_lengthscales_have_their_own_prior():
    """Marked features (a choice's one-hot columns) are LogNormal(log 4, 0.5), the others as
    before; a mask of another length is refused."""
    theta = np.array([-0.4, 1.1, 0.9, 0.3, 2.0])
    choice = np.array([False, True, True])
    expected = (
        stats.norm.logpdf(theta[0], math.log(0.3), 0.75)
        + stats.norm.logpdf(theta[1:3], math.log(4.0), 0.5).sum()
        + stats.norm.logpdf(theta[3:], math.log(100.0), 1.5).sum()
    )
    assert log_prior(theta, "probit", choice) == pytest.approx(expected, rel=1e-12)
    assert log_prior(theta, "probit") != pytest.approx(expected, rel=1e-6)
    with pytest.raises(ValueError, match="choice marks 2 features"):
        _prior("probit", 3, [True, False])


def test_the_fitted_hyperparameters_are_a_seeded_bounded_local_maximum():
    u, success = _corner(30, 0)
    theta = hyperparameters(u, success, seed=3)
    np.testing.assert_array_equal(theta, hyperparameters(u, success, seed=3))
    _, _, bounds = _prior("probit", 2)
    lo, hi = np.array(bounds).T
    assert ((theta >= lo - 1e-12) & (theta <= hi + 1e-12)).all()

    def objective(t):
        value = log_marginal(u, success, np.exp(t[:2]), math.exp(t[2]), math.exp(t[3]))[0]
        return value + log_prior(t)

    best = objective(theta)
    for j in range(len(theta)):
        for step in (-0.05, 0.05):
            moved = theta.copy()
            moved[j] = np.clip(moved[j] + step, lo[j], hi[j])
            assert objective(moved) <= best + 1e-7, (j, step)
    centre, _, _ = _prior("probit", 2)
    assert objective(centre) <= best + 1e-7


def test_an_unknown_or_unsupported_approximation_is_refused():
    u, success = _corner(8, 1)
    with pytest.raises(ValueError, match="inference must be one of"):
        log_marginal(u, success, 0.5, 1.0, inference="vb")
    with pytest.raises(ValueError, match="probit"):
        log_marginal(u, success, 0.5, 1.0, likelihood="logistic", inference="ep")
