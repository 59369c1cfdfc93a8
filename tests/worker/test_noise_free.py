"""Labels of a deterministic simulator: the noise variance has a floor (``noise_floor``), so the
posterior does not run to where the covariance is singular to rounding, and a default refit stays
quick and mixes. The floored posterior is checked against a grid quadrature of the same model."""

import math

import numpy as np
import pytest
import torch

from clients.reproduction.noise_free import campaign
from tests.worker.test_mcmc import _assert_matches, _quadrature
from worker import fitting
from worker.mcmc import sample_posterior
from worker.potential import GPPotential
from worker.spec.defaults import MCMC_DEFAULTS

FLOOR = MCMC_DEFAULTS["noise_floor"]


def _campaign(n: int) -> tuple[dict, list[dict]]:
    """The first ``n`` labels of a default campaign on noise-free Gramacy & Lee 1-D whose refit
    at 81 labels never finished before the floor (903 s timeouts), and its spec."""
    return campaign(n, dict(MCMC_DEFAULTS))


@pytest.mark.parametrize("n", [75, 81])
def test_a_default_refit_on_noise_free_labels_is_quick_and_mixes(n):
    """Without the floor: at 75 labels the noise's draws sat near 3e-14 (log s2 about -31) after
    9,321 gradient evaluations; at 80, one chain's step size went to about 0 at tree depth 10
    (51 s cold, R-hat 1.18); at 81, three 903 s timeouts. With it: about 3,000 here."""
    spec, labels = _campaign(n)
    post = fitting.posterior(spec, fitting.prepare(spec, labels), None)
    d = post.diagnostics
    assert (post.noise.numpy() >= FLOOR).all() and d["noise_floor"] == FLOOR
    assert d["max_rhat"] <= 1.05 and d["divergences"] == 0
    assert d["tree_depth_max"] <= 6 and min(d["step_size"]) > 0.05
    assert d["gradient_evaluations"] < 15_000
    assert d["target"]["met"]


def test_old_specs_get_the_floor_and_a_campaign_may_set_its_own():
    spec, _ = _campaign(3)
    old = {**spec, "mcmc": {k: v for k, v in spec["mcmc"].items() if k != "noise_floor"}}
    assert fitting.noise_floor(old) == FLOOR
    assert fitting.noise_floor({**spec, "mcmc": {**spec["mcmc"], "noise_floor": 0.0}}) == 0.0
    with pytest.raises(ValueError, match="noise_floor"):
        GPPotential(np.zeros((2, 1)), np.zeros(2), noise_floor=-1e-6)


def _noise_free(n: int = 40, seed: int = 5):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.random(n))
    y = np.sin(2 * np.pi * 1.5 * x) + 0.3 * x
    return torch.from_numpy(x[:, None]), torch.from_numpy((y - y.mean()) / y.std(ddof=1))


def _theta(post, floor) -> np.ndarray:
    """The sampled parameters: log lengthscale and log of the noise above the floor."""
    noise = post.noise.numpy() - floor
    return np.column_stack([np.log(post.lengthscale.numpy()[:, 0]), np.log(noise)])


@pytest.fixture(scope="module")
def floored():
    u, z = _noise_free()
    post = sample_posterior(u, z, chains=4, warmup=300, samples=1500, seed=0, target=None)
    return u, z, post


def test_the_floored_posterior_of_noise_free_data_matches_quadrature(floored):
    """The noise's posterior piles up at the floor, with the prior's tail below it: NUTS's
    marginals of both parameters agree with the quadrature's to a tenth of an sd (means) and a
    fifth (5%, 50%, 95% quantiles)."""
    u, z, post = floored
    exact = _quadrature(u, z, size=200, noise_floor=FLOOR)
    assert exact["log_s2"]["quantiles"][1] < math.log(FLOOR)  # the mass is at the floor
    d = post.diagnostics
    assert d["max_rhat"] < 1.02 and d["min_ess_bulk"] > 800 and d["divergences"] == 0
    _assert_matches(_theta(post, FLOOR), exact, tol_mean=0.1, tol_q=0.2)


def test_the_quadrature_check_tells_one_floor_from_another(floored):
    """The check has teeth: the same draws against the model with a floor 100 times higher."""
    u, z, post = floored
    with pytest.raises(AssertionError):
        _assert_matches(_theta(post, FLOOR), _quadrature(u, z, size=200, noise_floor=100 * FLOOR),
                        tol_mean=0.1, tol_q=0.2)  # fmt: skip
