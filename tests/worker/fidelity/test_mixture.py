"""The multi-fidelity model's Laplace mixture (:mod:`worker.fidelity.mixture`) against NUTS on
the same labels (an independent sampler of the same posterior), its cold search against the
potential's gradient, and a warm mixture from the one before."""

import numpy as np
import pytest

from fbgp_al.worker.fidelity.mixture import local_minima, mixture_sample, search_bounds
from fbgp_al.worker.fidelity.model import Potential, sample


def _forrester_levels(cheap: int, fine: int, seed: int = 0) -> Potential:
    """Two levels of Forrester's function at random points, with noise of sd 0.1."""
    rng = np.random.default_rng(seed)

    def f(x):
        return (6 * x - 2) ** 2 * np.sin(12 * x - 4)

    uc, uf = rng.random(cheap), rng.random(fine)
    y = np.r_[0.5 * f(uc) + 10 * (uc - 0.5) - 5, f(uf)] + 0.1 * rng.standard_normal(cheap + fine)
    t = np.r_[np.zeros(cheap, dtype=int), np.ones(fine, dtype=int)]
    return Potential(np.r_[uc, uf][:, None], t, (y - y.mean()) / y.std(), 2, 1e-6)


@pytest.fixture(scope="module")
def potential():
    return _forrester_levels(30, 8)


def test_the_mixture_draws_what_nuts_draws(potential):
    theta, report = mixture_sample(potential, 150, 0, None, 2)
    assert report["method"] == "laplace" and report["start"] == "cold"
    assert report["khat"] <= report["khat_limit"] and report["importance_ess"] > 50
    reference, nuts = sample(potential, 2, 150, 200, 0)
    assert nuts["max_rhat"] < 1.05
    mean, sd = reference.mean(0), reference.std(0)
    # each hyperparameter's posterior mean within a third of its sd (the draws' Monte Carlo
    # error is about a tenth), its spread within a factor of 1.5
    assert np.all(np.abs(theta.mean(0) - mean) < sd / 3)
    assert np.all((theta.std(0) > sd / 1.5) & (theta.std(0) < sd * 1.5))


def test_a_cold_search_ends_at_minima_of_the_potential(potential):
    found = local_minima(potential, 0)
    values = [value for value, _ in found]
    assert values == sorted(values)
    value, x = found[0]
    centre = potential.layout.prior_mean()
    assert value <= potential.values(centre[None])[0]
    bounds = np.array(search_bounds(potential.layout))
    inside = np.all((x > bounds[:, 0] + 1e-6) & (x < bounds[:, 1] - 1e-6))
    assert inside and np.abs(potential(x[None])[1][0]).max() < 1e-2  # a stationary point


def test_a_warm_mixture_starts_from_the_modes_before_and_costs_less(potential):
    _, cold = mixture_sample(potential, 150, 0, None, 3)
    more = _forrester_levels(31, 8)  # a label more, of the same data set
    theta, warm = mixture_sample(more, 150, 1, cold["adaptation"], 3)
    assert warm["start"] == "warm" and warm["khat"] <= warm["khat_limit"]
    assert warm["gradient_evaluations"] < cold["gradient_evaluations"]
    adaptation = warm["adaptation"]
    assert adaptation["searched_at"] == 38  # the cold search's labels, kept
    assert np.shape(adaptation["last"]) == (3, more.layout.size) and theta.shape[0] == 150
