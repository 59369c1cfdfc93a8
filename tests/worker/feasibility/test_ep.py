"""Expectation propagation for the failure model (:mod:`worker.feasibility.ep`): at its fixed
point each site's tilted distribution has the posterior marginal's moments (by quadrature); its
log marginal likelihood against the exact one of a few runs (a Gaussian orthant probability) and
closer to it than Laplace's; a start at the fixed point stays there."""

import math

import numpy as np
import pytest
from scipy import integrate, stats

from fbgp_al.worker.feasibility.ep import expectation_propagation
from fbgp_al.worker.feasibility.laplace import posterior_mode
from fbgp_al.worker.feasibility.likelihoods import kernel


def _problem(n: int, seed: int, variance: float = 2.0):
    rng = np.random.default_rng(seed)
    u = rng.random((n, 1))
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return kernel(u, u, 0.3, variance, 0.5), y


def test_at_the_fixed_point_each_tilted_distribution_has_the_marginal_s_moments():
    K, y = _problem(6, 0)
    sites = expectation_propagation(K, y)
    Sigma = np.linalg.inv(np.linalg.inv(K) + np.diag(sites.tau))
    mu = Sigma @ sites.nu
    for i in range(len(y)):
        tau_c = 1.0 / Sigma[i, i] - sites.tau[i]
        m_c = (mu[i] / Sigma[i, i] - sites.nu[i]) / tau_c
        sd = math.sqrt(1.0 / tau_c)

        def moment(power, i=i, m_c=m_c, sd=sd):
            return integrate.quad(
                lambda f: f**power * stats.norm.pdf(f, m_c, sd) * stats.norm.cdf(y[i] * f),
                m_c - 12 * sd,
                m_c + 12 * sd,
                epsabs=1e-13,
                limit=200,
            )[0]

        z0, z1, z2 = moment(0), moment(1), moment(2)
        assert z1 / z0 == pytest.approx(mu[i], abs=1e-6)
        assert z2 / z0 - (z1 / z0) ** 2 == pytest.approx(Sigma[i, i], abs=1e-6)


@pytest.mark.parametrize(
    ("n", "seed", "variance"), [(2, 0, 0.5), (2, 0, 8.0), (3, 1, 2.0), (3, 2, 8.0)]
)
def test_the_log_marginal_likelihood_is_near_the_exact_one_and_nearer_than_laplace_s(
    n, seed, variance
):
    """For a probit classifier ``Z = P(y_i (f_i + e_i) > 0 for all i)``, ``e ~ N(0, I)``: an
    orthant probability of ``N(0, Y (K + I) Y)``."""
    K, y = _problem(n, seed, variance)
    cov = y[:, None] * y[None, :] * (K + np.eye(n))
    exact = math.log(
        stats.multivariate_normal(np.zeros(n), cov, abseps=1e-10, releps=1e-10).cdf(np.zeros(n))
    )
    ep = expectation_propagation(K, y).log_marginal
    laplace = posterior_mode(K, y).log_marginal
    assert abs(ep - exact) < 5e-3
    assert abs(ep - exact) < abs(laplace - exact) / 3


def test_a_start_at_the_fixed_point_stays_there():
    K, y = _problem(8, 3)
    cold = expectation_propagation(K, y)
    warm = expectation_propagation(K, y, cold.tau, cold.nu)
    assert warm.sweeps <= 2
    np.testing.assert_allclose(warm.tau, cold.tau, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(warm.nu, cold.nu, rtol=1e-6, atol=1e-9)
    assert warm.log_marginal == pytest.approx(cold.log_marginal, abs=1e-9)
