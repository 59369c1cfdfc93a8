"""Laplace's approximation of the failure model (:mod:`worker.feasibility.laplace`): the mode
where the gradient of ``log p(y | f) - f' K^-1 f / 2`` vanishes, found from any start, and the
approximate log marginal likelihood there, against a direct computation."""

import numpy as np
import pytest
from scipy import optimize, stats

from fbgp_al.worker.feasibility.laplace import posterior_mode
from fbgp_al.worker.feasibility.likelihoods import kernel, likelihood_terms


def _problem(n: int, seed: int):
    rng = np.random.default_rng(seed)
    u = rng.random((n, 2))
    y = np.where(u[:, 0] + 0.3 * rng.standard_normal(n) > 0.5, 1.0, -1.0)
    return kernel(u, u, np.array([0.3, 0.6]), 2.0, 0.5), y


@pytest.mark.parametrize("likelihood", ["probit", "logistic"])
def test_the_mode_is_where_the_gradient_vanishes(likelihood):
    K, y = _problem(12, 0)
    mode = posterior_mode(K, y, likelihood)
    _, grad, W, _ = likelihood_terms(mode.f, y, likelihood)
    np.testing.assert_allclose(mode.f, K @ mode.a, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(mode.a, grad, atol=1e-6)  # f = K grad log p(y | f)
    # log q(y | X) = log p(y | f) - f' K^-1 f / 2 - log |I + W^1/2 K W^1/2| / 2 (GPML eq. 3.32)
    sW = np.sqrt(W)
    _, logdet = np.linalg.slogdet(np.eye(len(y)) + sW[:, None] * K * sW[None, :])
    expected = likelihood_terms(mode.f, y, likelihood)[0] - 0.5 * mode.a @ mode.f - 0.5 * logdet
    assert mode.log_marginal == pytest.approx(expected, rel=1e-10)


def test_any_start_reaches_the_same_mode():
    K, y = _problem(10, 1)
    cold = posterior_mode(K, y)
    for a0 in (np.random.default_rng(2).standard_normal(10), 0.9 * cold.a, -cold.a):
        warm = posterior_mode(K, y, a0=a0)
        np.testing.assert_allclose(warm.f, cold.f, atol=1e-6)
        assert warm.log_marginal == pytest.approx(cold.log_marginal, abs=1e-9)


@pytest.mark.parametrize(("k", "y"), [(0.3, 1.0), (4.0, -1.0), (25.0, 1.0)])
def test_one_run_s_mode_is_the_one_dimensional_maximum(k, y):
    """``log Phi(y f) - f^2 / (2 k)`` maximized by scipy."""
    best = optimize.minimize_scalar(
        lambda f: -(stats.norm.logcdf(y * f) - f * f / (2 * k)),
        bounds=(-50, 50),
        method="bounded",
        options={"xatol": 1e-12},
    )
    mode = posterior_mode(np.array([[k]]), np.array([y]))
    assert mode.f[0] == pytest.approx(best.x, abs=1e-6)
