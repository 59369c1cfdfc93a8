"""The failure model's building blocks (:mod:`worker.feasibility.likelihoods`): the kernel
against scikit-learn's, the likelihoods' values against scipy's, and the predictive probability
against quadrature."""

import math

import numpy as np
import pytest
from scipy import integrate, special, stats
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

from fbgp_al.worker.feasibility.likelihoods import kernel, likelihood_terms, predictive_probability


def test_the_kernel_is_scikit_learns_constant_times_rbf_plus_a_constant():
    rng = np.random.default_rng(0)
    u1, u2 = rng.random((7, 3)), rng.random((5, 3))
    lengthscale, variance, bias = np.array([0.2, 0.7, 3.0]), 1.7, 0.4
    reference = C(variance) * RBF(lengthscale) + C(bias)
    np.testing.assert_allclose(
        kernel(u1, u2, lengthscale, variance, bias), reference(u1, u2), rtol=1e-12
    )
    K = kernel(u1, u1, lengthscale, variance, bias)
    np.testing.assert_allclose(K, K.T, rtol=0, atol=0)
    np.testing.assert_allclose(np.diag(K), variance + bias, rtol=1e-14)
    assert np.linalg.eigvalsh(K).min() > -1e-12


def test_no_rounding_lifts_the_kernel_above_its_variance():
    """Squared distances of nearly equal points, which rounding makes negative, are clamped at
    zero: the kernel never exceeds ``s2 + b2``."""
    u = 0.8 + 1e-9 * np.random.default_rng(0).random((20, 3))
    K = kernel(u, u, 0.05, 2.0, 0.5)
    assert K.max() <= 2.5


@pytest.mark.parametrize("f", [-40.0, -5.0, 0.0, 3.0, 40.0])
def test_the_log_likelihoods_are_scipys_even_far_in_the_tails(f):
    y = np.array([1.0, -1.0])
    fs = np.array([f, f])
    probit, grad, W, _ = likelihood_terms(fs, y, "probit")
    assert probit == pytest.approx(stats.norm.logcdf(y * fs).sum(), rel=1e-12)
    assert np.isfinite(grad).all() and (W >= 0).all()
    logistic, *_ = likelihood_terms(fs, y, "logistic")
    assert logistic == pytest.approx(-np.logaddexp(0.0, -y * fs).sum(), rel=1e-12)
    with pytest.raises(ValueError, match="likelihood must be one of"):
        likelihood_terms(fs, y, "cauchit")


@pytest.mark.parametrize("likelihood", ["probit", "logistic"])
@pytest.mark.parametrize(("mean", "var"), [(0.0, 0.0), (1.3, 0.2), (-2.0, 9.0), (0.5, 400.0)])
def test_the_predictive_probability_is_the_integral_of_the_likelihood(likelihood, mean, var):
    link = special.ndtr if likelihood == "probit" else special.expit
    if var == 0.0:
        expected = float(link(mean))
    else:
        sd = math.sqrt(var)
        expected = integrate.quad(
            lambda f: link(f) * stats.norm.pdf(f, mean, sd),
            mean - 12 * sd,
            mean + 12 * sd,
            epsabs=1e-13,
            limit=200,
        )[0]
    got = predictive_probability(mean, var, likelihood)
    assert float(got) == pytest.approx(expected, abs=1e-9)


def test_the_predictive_probability_keeps_its_shape_and_reads_a_negative_variance_as_zero():
    mean = np.linspace(-2, 2, 6).reshape(2, 3)
    for likelihood in ("probit", "logistic"):
        p = predictive_probability(mean, -np.ones_like(mean), likelihood)
        assert p.shape == (2, 3)
        np.testing.assert_allclose(p, predictive_probability(mean, 0.0 * mean, likelihood))
    with pytest.raises(ValueError, match="likelihood must be one of"):
        predictive_probability(mean, mean, "cauchit")
