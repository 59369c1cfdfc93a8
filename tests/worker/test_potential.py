import math

import numpy as np
import pytest
import torch

from worker.gp import log_marginal_likelihood
from worker.potential import GPPotential

D = torch.float64


def _reference(u, z, theta):
    """-log posterior from the GP's likelihood and the contract's LogNormal(0, sqrt 3) priors, in
    log space (where they are N(0, 3))."""
    d = u.shape[1]
    prior = torch.distributions.Normal(0.0, math.sqrt(3.0)).log_prob(theta).sum(-1)
    return -(log_marginal_likelihood(u, z, theta[:, :d].exp(), theta[:, d].exp()) + prior)


@pytest.mark.parametrize("n,d", [(1, 1), (7, 1), (12, 3)])
def test_value_and_analytic_gradient_match_autograd(n, d):
    g = torch.Generator().manual_seed(n * 10 + d)
    u = torch.rand(n, d, generator=g, dtype=D)
    z = torch.randn(n, generator=g, dtype=D)
    theta = torch.randn(6, d + 1, generator=g, dtype=D)
    value, grad = map(torch.from_numpy, GPPotential(u, z)(theta.numpy()))
    t = theta.clone().requires_grad_()
    ref = _reference(u, z, t)
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
