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
        dist = squared_distances(u, u).reshape(self.d, -1)  # d x n^2
        self.neg_half_dist = -0.5 * dist
        self.eye = torch.eye(self.n, dtype=u.dtype)
        self.derivatives = torch.cat([dist, self.eye.reshape(1, -1)]).T.contiguous()  # n^2 x (d+1)
        self.exponents = torch.tensor([-2.0] * self.d + [1.0], dtype=u.dtype)
        # the constant parts of -log N(z; 0, K) and -log prior
        self.constant = 0.5 * self.n * LOG_2PI + 0.5 * self.dim * math.log(
            2 * math.pi * PRIOR_VARIANCE
        )
        self.evaluations = 0

    @property
    def dim(self) -> int:
        return self.d + 1

    def __call__(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.evaluations += 1
        finite = torch.isfinite(theta).all(-1)
        all_finite = bool(finite.all())
        if not all_finite:
            theta = torch.where(finite[:, None], theta, 0.0)
        d, n, batch = self.d, self.n, len(theta)
        # (1/l_1^2, ..., 1/l_d^2, s2): the factors of dK/dtheta_j = (Kf * D_j) e_j, where the
        # "distance" of the noise is the identity (Kf has a unit diagonal)
        e = torch.exp(theta * self.exponents)  # B x (d + 1)
        kf = torch.exp(e[:, :d] @ self.neg_half_dist).view(batch, n, n)
        factor = cholesky(torch.addcmul(kf, e[:, d].view(batch, 1, 1), self.eye))
        k_inv = torch.cholesky_inverse(factor.chol)
        alpha = k_inv @ self.z  # B x n
        w = torch.baddbmm(k_inv, alpha[:, :, None], alpha[:, None, :], beta=-1)  # a a^T - K^-1
        grad = theta / PRIOR_VARIANCE - 0.5 * ((w * kf).view(batch, -1) @ self.derivatives) * e
        value = (
            0.5 * (alpha @ self.z)
            + factor.chol.diagonal(dim1=-2, dim2=-1).log().sum(-1)
            + theta.square().sum(-1) / (2 * PRIOR_VARIANCE)
            + self.constant
        )
        if all_finite and bool(factor.ok.all()):
            return value, grad
        good = finite & factor.ok & torch.isfinite(value)
        return torch.where(good, value, torch.inf), torch.where(good[:, None], grad, 0.0)
