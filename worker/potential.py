"""The NUTS target: minus the log posterior of the GP hyperparameters, with its analytic gradient.

Parameters live in log space, ``theta = (log l_1, ..., log l_d, log s2)``; the priors
``l_i, s2 ~ LogNormal(0, sqrt(3))`` are ``N(0, 3)`` on ``theta`` (no Jacobian term needed).
The gradient of the log marginal likelihood is ``0.5 tr((a a^T - K^-1) dK/dtheta)`` with
``a = K^-1 z``, ``dK/dlog l_i = Kf * D_i / l_i^2`` and ``dK/dlog s2 = s2 I``: one batched
Cholesky and inverse per call, no autograd.
"""

from __future__ import annotations

import math

import torch

from worker.gp import LOG_2PI, cholesky, squared_distances

PRIOR_VARIANCE = 3.0  # of each log-hyperparameter


def log_prior(theta: torch.Tensor) -> torch.Tensor:
    """``sum_j log N(theta_j; 0, 3)`` for ``theta`` ``B x (d + 1)`` -> ``B``."""
    return -0.5 * (theta**2).sum(-1) / PRIOR_VARIANCE - 0.5 * theta.shape[-1] * math.log(
        2 * math.pi * PRIOR_VARIANCE
    )


class GPPotential:
    """``U(theta) = -log p(z | theta) - log p(theta)`` for data ``u`` (``n x d``), ``z`` (``n``).

    Calling it on ``theta`` (``B x (d + 1)``) returns ``U`` (``B``) and ``dU/dtheta``
    (``B x (d + 1)``). Rows that are not finite, or whose covariance no jitter can factorize,
    get ``U = inf`` and a zero gradient, so a sampler sees them as divergent, never as NaN.
    """

    def __init__(self, u: torch.Tensor, z: torch.Tensor):
        self.n, self.d = u.shape
        self.z = z
        self.dist = squared_distances(u, u).reshape(self.d, -1)  # d x n^2
        self.eye = torch.eye(self.n, dtype=u.dtype)
        self.evaluations = 0

    @property
    def dim(self) -> int:
        return self.d + 1

    def __call__(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.evaluations += 1
        finite = torch.isfinite(theta).all(-1)
        theta_safe = torch.where(finite[:, None], theta, 0.0)
        inv_l2 = torch.exp(-2 * theta_safe[:, : self.d])  # B x d
        s2 = torch.exp(theta_safe[:, self.d])  # B
        batch = len(theta)
        kf = torch.exp(-0.5 * (inv_l2 @ self.dist)).reshape(batch, self.n, self.n)
        factor = cholesky(kf + s2[:, None, None] * self.eye)
        chol = factor.chol
        alpha = torch.cholesky_solve(self.z.expand(batch, -1)[..., None], chol)  # B x n x 1
        k_inv = torch.cholesky_inverse(chol)
        nll = 0.5 * (
            (self.z * alpha[..., 0]).sum(-1)
            + 2 * chol.diagonal(dim1=-2, dim2=-1).log().sum(-1)
            + self.n * LOG_2PI
        )
        w = alpha @ alpha.transpose(-1, -2) - k_inv  # B x n x n
        grad_loglik = torch.empty_like(theta_safe)
        grad_loglik[:, : self.d] = 0.5 * ((w * kf).reshape(batch, -1) @ self.dist.T) * inv_l2
        grad_loglik[:, self.d] = 0.5 * s2 * w.diagonal(dim1=-2, dim2=-1).sum(-1)
        value = nll - log_prior(theta_safe)
        grad = theta_safe / PRIOR_VARIANCE - grad_loglik
        good = finite & factor.ok & torch.isfinite(value)
        value = torch.where(good, value, torch.inf)
        grad = torch.where(good[:, None], grad, 0.0)
        return value, grad
