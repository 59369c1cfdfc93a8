"""Cold starts (worker.cold_start, init "grid"): chains begin in the posterior's major mode,
also where a lengthscale shared by all inputs points to a minor one."""

import numpy as np
import pytest
from scipy.optimize import minimize

from fbgp_al.clients.reproduction.core_data import campaign_data
from fbgp_al.worker.cold_start import initial_points
from fbgp_al.worker.mcmc import sample_posterior
from fbgp_al.worker.potential import GPPotential

# The reproduction's first 100 Ishigami points (its QB-MGP campaign of run 0): two modes of
# (log l_1, log l_2, log l_3, log s2). The major one (log posterior -101.6, Laplace mass about
# 100 times the minor one's) has a long lengthscale for the second input and more noise; the
# minor one (-104.2) is where the grid of one shared lengthscale leads every chain.
MAJOR = [-1.68, 2.22, -1.47, -1.68]
MINOR = [-1.60, -1.65, -1.51, -4.50]


@pytest.fixture(scope="module")
def ishigami():
    u, z = campaign_data("ishigami", 100)
    return u.numpy(), z.numpy()


def _log_posterior_at_mode(potential, start):
    result = minimize(
        lambda x: tuple(a[0] for a in potential(x[None])), start, jac=True, method="L-BFGS-B"
    )
    return -result.fun, result.x


def test_cold_chains_find_the_major_mode_that_a_shared_lengthscale_misses(ishigami):
    u, z = ishigami
    potential = GPPotential(u, z)
    major, at_major = _log_posterior_at_mode(potential, MAJOR)
    minor, at_minor = _log_posterior_at_mode(potential, MINOR)
    assert np.abs(at_major - at_minor).max() > 3 and major > minor + 2
    post = sample_posterior(u, z, chains=2, warmup=30, samples=30, seed=2)
    chains = post.log_draws().numpy().reshape(2, 30, 4)
    medians = np.median(chains, 1)
    # every chain in the major mode: closer to its log posterior than to the minor one's
    assert (-potential(medians)[0] > (major + minor) / 2).all()
    assert (medians[:, 1] > 1.0).all()
    # a chain's start depends on the seed and its number only (chain groups over workers)
    both, guess = initial_points(potential, [0, 1, 2], 2, "grid")
    some, some_guess = initial_points(potential, [1, 2], 2, "grid")
    assert np.array_equal(both[1:], some) and np.array_equal(guess[1:], some_guess)
    assert np.isfinite(potential(both)[0]).all() and len(np.unique(both, axis=0)) == 3


def test_a_subset_s_search_polished_on_every_label_finds_the_full_search_s_best_mode(
    ishigami, monkeypatch
):
    """Past ``SEARCH_LABELS`` labels the cold search runs on a random subset and polishes each
    distinct minimum on every label: on Ishigami's 100 points, a search on 70 of them ends at
    the full search's best mode (the major one), with far fewer densities of all 100."""
    from fbgp_al.worker import cold_start
    from fbgp_al.worker.laplace import Counted

    u, z = ishigami
    full = Counted(GPPotential(u, z))
    best_full = cold_start.local_minima(full, 0)[0]
    monkeypatch.setattr(cold_start, "SEARCH_LABELS", 70)
    sub = Counted(GPPotential(u, z))
    found = cold_start.local_minima(sub, 0)
    assert found[0][0] == pytest.approx(best_full[0], abs=1e-6)
    np.testing.assert_allclose(found[0][1], best_full[1], atol=1e-3)
    np.testing.assert_allclose(found[0][1], MAJOR, atol=0.05)
    assert sub.values_only == 0 and sub.gradients < full.gradients / 3
    assert [v for v, _ in found] == sorted(v for v, _ in found)


def test_a_potential_on_a_subset_is_the_potential_of_those_labels(ishigami):
    u, z = ishigami
    rows = np.array([3, 10, 11, 40, 77, 99])
    theta = np.array([[-1.0, 0.5, -1.2, -3.0], [0.2, 2.0, -1.5, -1.7]])
    np.testing.assert_array_equal(
        GPPotential(u, z).subset(rows).values(theta), GPPotential(u[rows], z[rows]).values(theta)
    )


def test_newton_steps_with_a_nearby_hessian_reach_l_bfgs_s_mode_in_a_few_gradients(ishigami):
    """From the major mode's neighbourhood (half a posterior sd away in every direction), Newton
    steps with the mode's Hessian taken there reach the minimum L-BFGS finds, in at most 4
    gradients; with no step to take (``steps=0``) a start that is not a minimum gives None."""
    from fbgp_al.worker.cold_start import descend, mode_gaussian, newton, search_bounds
    from fbgp_al.worker.laplace import Counted

    u, z = ishigami
    potential = Counted(GPPotential(u, z))
    bounds = search_bounds(potential)
    value, mode = descend(potential, np.array(MAJOR), bounds)
    h, scale, _ = mode_gaussian(potential, mode)
    start = mode + scale @ np.full(len(mode), 0.5)
    before = potential.gradients
    found = newton(potential, start, h * 1.02, bounds)  # a Hessian of 2% more labels
    assert found is not None and potential.gradients - before <= 4
    assert found[0] == pytest.approx(value, abs=1e-5)
    # within a thousandth of a posterior sd of the mode, in each direction of the Hessian
    assert np.abs(np.linalg.solve(scale, found[1] - mode)).max() < 2e-3
    assert newton(potential, start, h, bounds, steps=0) is None
