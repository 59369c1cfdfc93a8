"""The sampler on targets whose answer is known, and its bookkeeping."""

import numpy as np
import pytest

from worker import nuts

SCALES = np.array([1.0, 10.0, 0.1])


def gaussian(theta):
    """N(0, diag(SCALES^2)) as a potential."""
    return 0.5 * ((theta / SCALES) ** 2).sum(-1), theta / SCALES**2


def test_samples_an_anisotropic_gaussian_and_adapts_the_mass_matrix():
    draws = nuts.sample(gaussian, np.full((4, 3), 0.5), warmup=300, samples=1000, seed=3)
    x = draws.theta.reshape(-1, 3)
    assert np.all(np.abs(x.mean(0)) < 0.12 * SCALES)
    assert np.allclose(x.std(0), SCALES, rtol=0.1)
    # the inverse mass matrix estimates the posterior variances
    assert np.allclose(draws.inverse_mass.mean(0), SCALES**2, rtol=0.5)
    assert 0.7 < draws.accept_stat.mean() < 0.99
    assert draws.diverging.sum() == 0


def test_a_chain_draws_the_same_whichever_chains_run_beside_it():
    init = np.array([[0.5, -1.0, 0.02], [1.0, 3.0, -0.1], [-0.3, 0.0, 0.05]])
    three = nuts.sample(gaussian, init, warmup=30, samples=20, seed=11)
    two = nuts.sample(gaussian, init[:2], warmup=30, samples=20, seed=11)
    assert np.allclose(three.theta[1], two.theta[1], atol=1e-12)
    assert not np.allclose(three.theta[0], three.theta[1])  # chains have their own streams


def test_same_seed_same_draws_other_seed_other_draws():
    init = np.zeros((2, 3))
    a = nuts.sample(gaussian, init, warmup=20, samples=10, seed=5)
    b = nuts.sample(gaussian, init, warmup=20, samples=10, seed=5)
    c = nuts.sample(gaussian, init, warmup=20, samples=10, seed=6)
    assert np.array_equal(a.theta, b.theta)
    assert not np.allclose(a.theta, c.theta)


def test_stan_adaptation_windows():
    s = nuts.NutsSettings()
    assert nuts.adaptation_windows(200, s) == [(75, 100), (100, 150)]
    assert nuts.adaptation_windows(1000, s) == [(75, 100), (100, 150), (150, 250), (250, 450),
                                               (450, 950)]  # fmt: skip
    # short warm-ups shrink the buffers as Stan does: 15% / 75% / 10%
    assert nuts.adaptation_windows(100, s) == [(15, 90)]
    assert nuts.adaptation_windows(10, s) == []


def test_divergences_are_detected_and_reported():
    def funnel_wall(theta):
        # a potential that jumps to a huge value off a thin slab: large steps diverge
        inside = np.abs(theta[:, 0]) < 1.0
        value = np.where(inside, 0.5 * (theta**2).sum(-1), 1e6)
        return value, np.where(inside[:, None], theta, 0.0)

    draws = nuts.sample(funnel_wall, np.zeros((2, 2)), warmup=0, samples=30, seed=1)
    assert draws.diverging.any()
    assert np.all(np.abs(draws.theta[:, :, 0]) < 1.0)  # never accepts a point past the wall


@pytest.mark.parametrize("depth", [1, 3])
def test_tree_depth_is_capped(depth):
    settings = nuts.NutsSettings(max_tree_depth=depth)
    draws = nuts.sample(gaussian, np.zeros((2, 3)), warmup=0, samples=20, seed=2, settings=settings)
    assert draws.tree_depth.max() <= depth
    assert draws.n_leapfrog.max() <= 2**depth - 1
