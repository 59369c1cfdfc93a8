"""The NUTS target (:mod:`worker.potential`): the value and analytic gradient against autograd,
unusable and extreme parameters, batches in chunks, jitter, and a row's bits independent of its
batch; with known noise (labels that carry their own noise variances, ``Kf + diag(noise_z) + s2
I``), against autograd and scipy."""

import math

import numpy as np
import pytest
import torch
from scipy.stats import multivariate_normal

from fbgp_al.worker.gp import log_marginal_likelihood
from fbgp_al.worker.potential import GPPotential

D = torch.float64


def _reference(u, z, theta, noise_floor=0.0):
    """-log posterior from the GP's likelihood and the LogNormal(0, sqrt 3) priors on the
    lengthscales and on the noise above its floor, in log space (where they are N(0, 3))."""
    d = u.shape[1]
    zero, scale = torch.tensor(0.0, dtype=D), torch.tensor(math.sqrt(3.0), dtype=D)
    prior = torch.distributions.Normal(zero, scale).log_prob(theta).sum(-1)
    noise = noise_floor + theta[:, d].exp()
    return -(log_marginal_likelihood(u, z, theta[:, :d].exp(), noise) + prior)


@pytest.mark.parametrize(
    "n,d,floor", [(1, 1, 0.0), (7, 1, 0.0), (12, 3, 0.0), (7, 1, 1e-6), (12, 3, 0.05)]
)
def test_value_and_analytic_gradient_match_autograd(n, d, floor):
    g = torch.Generator().manual_seed(n * 10 + d)
    u = torch.rand(n, d, generator=g, dtype=D)
    z = torch.randn(n, generator=g, dtype=D)
    theta = torch.randn(6, d + 1, generator=g, dtype=D)
    value, grad = map(torch.from_numpy, GPPotential(u, z, noise_floor=floor)(theta.numpy()))
    t = theta.clone().requires_grad_()
    ref = _reference(u, z, t, floor)
    ref.sum().backward()
    assert torch.allclose(value, ref.detach(), atol=1e-10)
    assert torch.allclose(grad, t.grad, atol=1e-8, rtol=1e-8)


def test_unusable_parameters_are_infinite_with_zero_gradient():
    u = torch.rand(5, 1, dtype=D)
    z = torch.randn(5, dtype=D)
    theta = np.array([[np.nan, 0.0], [np.inf, 0.0], [-np.inf, 0.0], [0.0, -1.0]])
    value, grad = GPPotential(u, z)(theta)
    assert np.all(value[:3] == np.inf) and np.isfinite(value[3])
    assert (grad[:3] == 0).all() and np.isfinite(grad).all()


def test_extreme_but_finite_parameters_stay_finite():
    u = torch.tensor([[0.1], [0.1], [0.9]], dtype=D)
    z = torch.tensor([1.0, 1.0, -2.0], dtype=D)
    theta = np.array([[40.0, -60.0], [-40.0, -60.0], [0.0, 30.0]])
    value, grad = GPPotential(u, z)(theta)
    assert np.isfinite(value).all() and np.isfinite(grad).all()


@pytest.mark.parametrize("n,d", [(100, 3), (150, 6)])
def test_large_n_matches_autograd(n, d):
    """At the sizes real campaigns reach (one triangle, in place, buffers kept between calls):
    the same answer, call after call, as autograd through the GP's likelihood."""
    g = torch.Generator().manual_seed(n + d)
    u = torch.rand(n, d, generator=g, dtype=D)
    z = torch.randn(n, generator=g, dtype=D)
    potential = GPPotential(u, z)
    for batch in (5, 1, 5):
        theta = torch.randn(batch, d + 1, generator=g, dtype=D) * 0.5
        theta[:, d] -= 3.0
        value, grad = map(torch.from_numpy, potential(theta.numpy()))
        t = theta.clone().requires_grad_()
        ref = _reference(u, z, t)
        ref.sum().backward()
        assert torch.allclose(value, ref.detach(), rtol=1e-10, atol=1e-8)
        assert torch.allclose(grad, t.grad, rtol=1e-7, atol=1e-7)


def test_a_large_batch_goes_in_chunks_with_the_same_answer(monkeypatch):
    import fbgp_al.worker.potential as module

    rng = np.random.default_rng(0)
    u, z = rng.random((30, 2)), rng.standard_normal(30)
    theta = np.column_stack([rng.normal(-1, 0.5, (23, 2)), rng.normal(-2, 1, 23)])
    whole = GPPotential(u, z)(theta)
    monkeypatch.setattr(module, "BUFFER_ELEMENTS", 5 * 30 * 30)  # chunks of 5 rows
    chunked = GPPotential(u, z)
    parts = chunked(theta)
    assert all(len(b[0]) <= 5 for b in chunked.buffers.values())
    for a, b in zip(whole, parts, strict=True):
        assert np.allclose(a, b, rtol=1e-12, atol=1e-12)


def test_values_alone_are_the_call_s_values_bit_for_bit():
    """The cold search ranks its grid by ``values`` alone (no gradient): the same numbers as
    the call's, so the same starts; ``inf`` where the call's are (a covariance no jitter
    rescues), with known noise and prior means too."""
    rng = np.random.default_rng(3)
    u, z = rng.random((40, 3)), rng.standard_normal(40)
    theta = np.column_stack([rng.normal(-1, 1.5, (30, 3)), rng.normal(-3, 3, 30)])
    theta[4] = [-1.0, -1.0, -1.0, 800.0]  # an infinite noise: no finite density
    known_noise, prior_mean = 0.01 + rng.random(40) * 0.02, np.array([0.5, 0.0, -0.5, -1.0])
    for potential in (GPPotential(u, z), GPPotential(u, z, known_noise, prior_mean)):
        called = potential(theta)[0]
        alone = potential.values(theta)
        assert np.isinf(called[4]) and np.isinf(alone[4])
        assert np.array_equal(called, alone)


def test_a_covariance_that_needs_jitter_gets_the_gps_jitter():
    """Duplicated inputs and almost no noise: the Cholesky fails without jitter; the potential
    adds the jitter the GP adds and agrees with its likelihood."""
    u = torch.tensor([[0.2], [0.2], [0.5], [0.9]], dtype=D)
    z = torch.tensor([1.0, 1.0, -0.5, 0.3], dtype=D)
    theta = torch.tensor([[-1.0, -40.0]], dtype=D)
    value, grad = GPPotential(u, z)(theta.numpy())
    assert np.isfinite(value).all() and np.isfinite(grad).all()
    assert torch.allclose(torch.from_numpy(value), _reference(u, z, theta), rtol=1e-9)


@pytest.mark.parametrize("n,d", [(7, 1), (40, 2), (120, 6)])
def test_a_rows_bits_do_not_depend_on_the_batch_it_comes_in(n, d):
    """A chain's potential is the same to the bit alone, in any group of chains, or with all of
    them: chain groups on several workers then draw what one process draws."""
    rng = np.random.default_rng(n + d)
    potential = GPPotential(rng.random((n, d)), rng.standard_normal(n), noise_floor=1e-6)
    theta = rng.normal(size=(5, d + 1)) * 0.5 - 1.0
    value, grad = potential(theta)
    for groups in ([[0], [1], [2], [3], [4]], [[0, 1, 2], [3, 4]], [[4, 0], [2, 3, 1]]):
        for rows in groups:
            v, g = potential(theta[rows])
            assert v.tobytes() == value[rows].tobytes() and g.tobytes() == grad[rows].tobytes()


def _kernel(a, b, lengthscale):
    """The ARD RBF kernel written out in numpy."""
    diff = (a[:, None, :] - b[None, :, :]) / lengthscale
    return np.exp(-0.5 * (diff**2).sum(-1))


def _data(n, d, seed):
    rng = np.random.default_rng(seed)
    u, z = rng.random((n, d)), rng.standard_normal(n)
    noise = rng.uniform(0.0, 0.5, n)
    noise[0] = 0.0  # an exact label among them
    return u, z, noise


@pytest.mark.parametrize("n,d", [(1, 1), (9, 1), (15, 3)])
def test_the_potential_with_known_noise_matches_autograd_and_scipy(n, d):
    u, z, noise = _data(n, d, n + d)
    theta = np.random.default_rng(d).normal(-0.5, 0.7, (5, d + 1))
    value, grad = GPPotential(u, z, noise)(theta)
    # autograd through the torch GP's likelihood and the LogNormal(0, sqrt 3) priors
    t = torch.tensor(theta, requires_grad=True)
    zero, scale = torch.tensor(0.0, dtype=D), torch.tensor(math.sqrt(3.0), dtype=D)
    prior = torch.distributions.Normal(zero, scale).log_prob(t).sum(-1)
    lml = log_marginal_likelihood(
        torch.tensor(u), torch.tensor(z), t[:, :d].exp(), t[:, d].exp(), torch.tensor(noise)
    )
    (-(lml + prior)).sum().backward()
    assert np.allclose(value, (-(lml + prior)).detach().numpy(), rtol=1e-10, atol=1e-9)
    assert np.allclose(grad, t.grad.numpy(), rtol=1e-7, atol=1e-7)
    # and the likelihood itself against scipy with the covariance written out
    for row in range(len(theta)):
        ls, s2 = np.exp(theta[row, :d]), np.exp(theta[row, d])
        cov = _kernel(u, u, ls) + np.diag(noise) + s2 * np.eye(n)
        ref = multivariate_normal(np.zeros(n), cov).logpdf(z)
        assert lml[row].item() == pytest.approx(ref, rel=1e-10, abs=1e-9)


def test_the_noise_changes_the_potential_and_zero_noise_changes_nothing():
    u, z, noise = _data(12, 2, 0)
    theta = np.array([[-1.0, -0.5, -2.0], [0.3, -1.2, -4.0]])
    plain = GPPotential(u, z)(theta)
    zeros = GPPotential(u, z, np.zeros(12))(theta)
    known = GPPotential(u, z, noise)(theta)
    assert np.allclose(plain[0], zeros[0], rtol=1e-13) and np.allclose(plain[1], zeros[1])
    assert np.all(np.abs(plain[0] - known[0]) > 0.1)
    with pytest.raises(ValueError, match="one variance per label"):
        GPPotential(u, z, noise[:5])


def test_from_lean_from_labels_the_distances_are_built_input_by_input_to_the_same_numbers(
    monkeypatch,
):
    """The distances a potential keeps, built at once (below ``LEAN_FROM`` labels) and one
    input at a time (from it: at 5,000 labels, 3.2 GB at the peak against 5.8): the same
    numbers, and the same potential and gradient."""
    from fbgp_al.worker import potential

    rng = np.random.default_rng(5)
    u, z = rng.random((40, 3)), rng.standard_normal(40)
    theta = rng.normal(size=(4, 4))
    at_once = potential.distances(u)
    value, grad = GPPotential(u, z)(theta)
    monkeypatch.setattr(potential, "LEAN_FROM", 40)
    lean = potential.distances(u)
    for a, b in zip(lean, at_once, strict=True):
        assert a.shape == b.shape and a.flags["C_CONTIGUOUS"] and np.array_equal(a, b)
    lean_value, lean_grad = GPPotential(u, z)(theta)
    np.testing.assert_allclose(lean_value, value, rtol=1e-13)
    np.testing.assert_allclose(lean_grad, grad, rtol=1e-11, atol=1e-12)
