"""A log output's answers in its units (:mod:`worker.vocabulary.lognormal`, numpy only) against
scipy, computed independently: the lognormal's moments and log density (``scipy.stats.lognorm``),
the mixture's moments (the law of total variance over ``lognorm``'s), the mixture's quantiles
(the root of the mixture's CDF by ``scipy.optimize.brentq``), the normal CDF (``ndtr``); the
transform's round trip and the delta method of known noise (:mod:`worker.transforms`)."""

import numpy as np
import pytest
import torch
from scipy.optimize import brentq
from scipy.special import ndtr
from scipy.stats import lognorm, norm

from fbgp_al.worker.transforms import OutputStandardization
from fbgp_al.worker.vocabulary import lognormal


def _draws(seed=0, b=40, m=25):
    rng = np.random.default_rng(seed)
    mu = rng.normal(0, 0.3, (b, m)) + rng.normal(0, 2.0, m)  # draws that roughly agree
    s2 = rng.gamma(4.0, 0.05, (b, m))
    return mu, s2


def test_the_normal_cdf_is_scipys():
    x = np.linspace(-40, 40, 400_001)
    assert np.abs(lognormal.normal_cdf(x) - ndtr(x)).max() < 1e-15


def test_lognormal_moments_median_interval_and_density_are_scipys():
    mu, s2 = _draws()
    mu, s2 = mu[0], s2[0]
    law = lognorm(s=np.sqrt(s2), scale=np.exp(mu))
    got = lognormal.predictive(mu, s2)
    np.testing.assert_allclose(got["mean"], law.mean(), rtol=1e-13)
    np.testing.assert_allclose(got["variance"], law.var(), rtol=1e-12)
    np.testing.assert_allclose(got["median"], law.median(), rtol=1e-13)
    np.testing.assert_allclose(got["lower"], law.ppf(0.025), rtol=1e-12)
    np.testing.assert_allclose(got["upper"], law.ppf(0.975), rtol=1e-12)
    assert np.all(got["median"] < got["mean"])  # the mean is above the median
    y = np.exp(np.random.default_rng(1).normal(mu, 1.0))
    # the density of y: that of log y and the Jacobian -log y
    np.testing.assert_allclose(lognormal.log_density(y, mu, s2), law.logpdf(y), rtol=1e-12)
    np.testing.assert_allclose(
        lognormal.log_density(y, mu, s2), norm(mu, np.sqrt(s2)).logpdf(np.log(y)) - np.log(y)
    )


def test_the_mixtures_moments_and_quantiles_against_scipy():
    mu, s2 = _draws(seed=2)
    laws = lognorm(s=np.sqrt(s2), scale=np.exp(mu))
    got = lognormal.mixture(mu, s2)
    # the law of total variance over the draws' lognormals
    mean = laws.mean().mean(0)
    np.testing.assert_allclose(got["mixture_mean"], mean, rtol=1e-13)
    np.testing.assert_allclose(
        got["mixture_variance"], laws.var().mean(0) + laws.mean().var(0), rtol=1e-12
    )
    for key, p in (("mixture_median", 0.5), ("mixture_lower", 0.025), ("mixture_upper", 0.975)):
        for j in range(mu.shape[1]):

            def cdf(y, j=j, p=p):
                return lognorm(s=np.sqrt(s2[:, j]), scale=np.exp(mu[:, j])).cdf(y).mean() - p

            want = brentq(cdf, 1e-12, 1e12, xtol=1e-300, rtol=1e-14)
            assert got[key][j] == pytest.approx(want, rel=1e-11), (key, j)
    assert np.all(got["mixture_lower"] < got["mixture_median"])
    assert np.all(got["mixture_median"] < got["mixture_upper"])


def test_one_draws_mixture_is_its_lognormal_and_far_draws_stay_bracketed():
    mu, s2 = _draws(seed=3, b=1)
    one, mixture = lognormal.predictive(mu[0], s2[0]), lognormal.mixture(mu, s2)
    for key in ("mean", "variance", "median", "lower", "upper"):
        np.testing.assert_allclose(mixture[f"mixture_{key}"], one[key], rtol=1e-12)
    # two draws far apart: the median lies between them, where the mixture's CDF is 1/2
    far_mu, far_s2 = np.array([[0.0], [50.0]]), np.array([[1.0], [1.0]])
    q = lognormal.mixture_quantile(far_mu, far_s2, 0.0)[0]
    assert 0.0 < q < 50.0
    assert norm.cdf(q, far_mu[:, 0], 1.0).mean() == pytest.approx(0.5, abs=1e-12)


def test_moments_beyond_float64_stay_finite():
    got = lognormal.predictive(np.array([800.0, 0.0]), np.array([1.0, 2000.0]))
    assert all(np.isfinite(v).all() for v in got.values())
    assert got["mean"][0] == pytest.approx(np.finfo(np.float64).max, rel=1e-12)
    mixture = lognormal.mixture(np.array([[800.0], [1.0]]), np.array([[1.0], [1.0]]))
    assert all(np.isfinite(v).all() for v in mixture.values())


def test_the_log_transform_round_trips_and_takes_known_noise_by_the_delta_method():
    y = torch.tensor([0.01, 0.3, 2.0, 9.5], dtype=torch.float64)
    scale = OutputStandardization.from_labels(y, log=True)
    log_y = torch.log(y)
    assert scale.mean == pytest.approx(float(log_y.mean()))
    assert scale.std == pytest.approx(float(log_y.std(correction=1)))
    z = scale.to_z(y)
    torch.testing.assert_close(torch.exp(scale.mean + scale.std * z), y, rtol=1e-14, atol=0)
    assert scale.to_dict() == {"y_mean": scale.mean, "y_std": scale.std, "y_transform": "log"}
    assert OutputStandardization.of(scale.to_dict()) == scale
    # var(log y) ~ var(y) / y^2, then the GP's units
    noise = torch.tensor([1e-6, 1e-4, 0.04, 0.9], dtype=torch.float64)
    torch.testing.assert_close(scale.variance_to_z(noise, y), noise / y**2 / scale.std**2)
    with pytest.raises(ValueError, match="labels"):
        scale.variance_to_z(noise)
    # a model body of before the option: y as it is
    plain = OutputStandardization.of({"y_mean": 1.0, "y_std": 2.0})
    assert not plain.log and plain.to_dict() == {"y_mean": 1.0, "y_std": 2.0}
