"""The sampler on targets whose answer is known, and its bookkeeping."""

import numpy as np
import pytest

from fbgp_al.worker import nuts

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


def test_a_first_guess_of_the_metric_is_adapted_from():
    """A guess of the posterior's scales (a Laplace start's) is where the warm-up's windows
    begin: a short warm-up from a good guess samples as well as a long one from the identity,
    with fewer gradient evaluations, and the windows still adapt it."""
    guess = np.tile(np.diag(SCALES**2), (4, 1, 1))
    short = nuts.sample(
        gaussian,
        np.full((4, 3), 0.5),
        warmup=100,
        samples=1000,
        seed=3,
        inverse_mass=guess,
        adapt_mass=True,
    )
    x = short.theta.reshape(-1, 3)
    assert np.all(np.abs(x.mean(0)) < 0.12 * SCALES)
    assert np.allclose(x.std(0), SCALES, rtol=0.1)
    assert not np.array_equal(short.inverse_mass, np.tile(SCALES**2, (4, 1)))  # adapted
    assert np.allclose(short.inverse_mass.mean(0), SCALES**2, rtol=0.5)
    identity = nuts.sample(gaussian, np.full((4, 3), 0.5), warmup=100, samples=1000, seed=3)
    assert short.potential_calls < identity.potential_calls


def test_runs_of_different_lengths_concatenate_to_the_shortest():
    """Chain groups that sampled to their own share of a target end at different lengths; their
    merge keeps each chain's first draws (it failed on the arrays' shapes before)."""
    init = np.array([[0.5, -1.0, 0.02], [1.0, 3.0, -0.1], [-0.3, 0.0, 0.05]])
    long = nuts.sample(gaussian, init[:2], warmup=30, samples=40, seed=5, chain_ids=[0, 1])
    short = nuts.sample(gaussian, init[2:], warmup=30, samples=25, seed=5, chain_ids=[2])
    both = nuts.Draws.concatenate([long, short])
    assert both.theta.shape == (3, 25, 3) and both.n_leapfrog.shape == (3, 25)
    assert np.array_equal(both.theta[:2], long.theta[:, :25])
    assert np.array_equal(both.theta[2], short.theta[0])
    assert both.step_size.shape == (3,) and both.warmup_divergences.shape == (3,)
    assert both.potential_calls == long.potential_calls + short.potential_calls


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


CORRELATED = np.array([[1.0, 0.95, 0.0], [0.95, 1.0, 0.0], [0.0, 0.0, 0.25]])
CORRELATED_PRECISION = np.linalg.inv(CORRELATED)


def correlated(theta):
    """N(0, CORRELATED) as a potential: two coordinates with correlation 0.95."""
    g = theta @ CORRELATED_PRECISION
    return 0.5 * (g * theta).sum(-1), g


def test_dense_metric_learns_the_covariance_and_takes_fewer_leapfrogs():
    dense = nuts.NutsSettings(dense_mass=True)
    draws = nuts.sample(
        correlated, np.full((4, 3), 0.5), warmup=400, samples=800, seed=3, settings=dense
    )
    x = draws.theta.reshape(-1, 3)
    assert draws.inverse_mass.shape == (4, 3, 3)
    assert np.allclose(np.cov(x.T), CORRELATED, atol=0.12)
    # the adapted inverse mass matrix estimates the covariance, correlation included
    assert np.allclose(draws.inverse_mass.mean(0), CORRELATED, atol=0.2)
    diag = nuts.sample(correlated, np.full((4, 3), 0.5), warmup=400, samples=800, seed=3)
    assert diag.inverse_mass.shape == (4, 3)
    # along the narrow direction a diagonal metric needs many more steps per draw
    assert draws.n_leapfrog.mean() < 0.6 * diag.n_leapfrog.mean()
    assert draws.diverging.sum() == 0


def test_a_warm_start_keeps_a_dense_mass_matrix_and_reads_a_diagonal_one():
    dense = nuts.NutsSettings(dense_mass=True)
    first = nuts.sample(
        correlated, np.zeros((2, 3)), warmup=300, samples=50, seed=1, settings=dense
    )
    again = nuts.sample(
        correlated,
        first.theta[:, -1],
        warmup=30,
        samples=50,
        seed=2,
        settings=dense,
        step_size=first.step_size,
        inverse_mass=first.inverse_mass,
    )
    assert np.array_equal(again.inverse_mass, first.inverse_mass)  # only the step size is tuned
    diagonal = nuts.sample(
        correlated,
        first.theta[:, -1],
        warmup=30,
        samples=50,
        seed=2,
        settings=dense,
        step_size=first.step_size,
        inverse_mass=np.full((2, 3), 0.5),
    )
    assert np.array_equal(diagonal.inverse_mass, np.tile(np.diag([0.5] * 3), (2, 1, 1)))


def test_more_draws_continue_the_same_chains():
    """Asking for more draws when the first ones are there continues the chains: a single chain
    draws exactly what a run asked for all of them from the start draws."""
    asked = []

    def more(draws):
        asked.append(draws.theta.shape[1])
        return 30 if draws.theta.shape[1] < 110 else 0

    init = np.array([[0.5, -1.0, 0.02]])
    grown = nuts.sample(gaussian, init, warmup=40, samples=50, seed=7, more=more)
    whole = nuts.sample(gaussian, init, warmup=40, samples=110, seed=7)
    assert asked == [50, 80, 110]
    assert grown.theta.shape == (1, 110, 3)
    assert np.array_equal(grown.theta, whole.theta)
    assert np.array_equal(grown.n_leapfrog, whole.n_leapfrog)
    # several chains: each runs every draw asked for, none left unfilled
    several = nuts.sample(
        gaussian,
        np.zeros((3, 3)),
        warmup=20,
        samples=10,
        seed=7,
        more=lambda d: 15 if d.theta.shape[1] == 10 else 0,
    )
    assert several.theta.shape == (3, 25, 3) and np.isfinite(several.theta).all()
    assert np.isfinite(several.n_leapfrog).all() and (several.tree_depth > 0).all()
