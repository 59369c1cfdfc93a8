"""The NUTS target: minus the log posterior of the GP hyperparameters, with its analytic gradient.

Parameters live in log space, ``theta = (log l_1, ..., log l_d, log s2)``; the priors
``l_i, s2 ~ LogNormal(0, sqrt(3))`` are ``N(0, 3)`` on ``theta`` (no Jacobian term needed).
The gradient of the log marginal likelihood is ``0.5 tr((a a^T - K^-1) dK/dtheta)`` with
``a = K^-1 z``, ``dK/dlog l_i = Kf * D_i / l_i^2`` and ``dK/dlog s2 = s2 I``: one batched
Cholesky and inverse per call, no autograd.

Speed: the sampler calls this ~5,000 times per refit on a handful of small matrices, so the cost
is the number of operations, not their flops. The batched Cholesky and its inverse run in torch
(LAPACK over the batch in one call); everything else runs in numpy, whose operations on arrays
this small cost a third of torch's. Tensors pass between the two without copies.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from worker.gp import LOG_2PI, cholesky

PRIOR_VARIANCE = 3.0  # of each log-hyperparameter


class GPPotential:
    """``U(theta) = -log p(z | theta) - log p(theta)`` for data ``u`` (``n x d``), ``z`` (``n``).

    Calling it on ``theta`` (numpy, ``B x (d + 1)``) returns ``U`` (``B``) and ``dU/dtheta``
    (``B x (d + 1)``), float64 numpy arrays. Rows that are not finite, or whose covariance no
    jitter can factorize, get ``U = inf`` and a zero gradient, so a sampler sees them as divergent,
    never as NaN.
    """

    def __init__(self, u, z):
        u = np.asarray(u, dtype=np.float64)
        self.n, self.d = u.shape
        self.z = np.asarray(z, dtype=np.float64).reshape(-1)
        dist = ((u.T[:, :, None] - u.T[:, None, :]) ** 2).reshape(self.d, -1)  # d x n^2
        self.neg_half_dist = -0.5 * dist
        self.eye = np.eye(self.n)
        # n^2 x (d + 1): the "distances" whose products with (a a^T - K^-1) * Kf give the gradient;
        # the noise's is the identity, since Kf has a unit diagonal
        self.derivatives = np.ascontiguousarray(np.concatenate([dist, self.eye.reshape(1, -1)]).T)
        self.exponents = np.array([-2.0] * self.d + [1.0])
        self.diagonal = np.arange(self.n)
        # the constant parts of -log N(z; 0, K) and -log prior
        self.constant = 0.5 * self.n * LOG_2PI + 0.5 * self.dim * math.log(
            2 * math.pi * PRIOR_VARIANCE
        )

    @property
    def dim(self) -> int:
        return self.d + 1

    def __call__(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with np.errstate(all="ignore"):  # non-finite rows are caught below
            value, grad, ok = self._evaluate(np.asarray(theta, dtype=np.float64))
        if ok.all():
            return value, grad
        return np.where(ok, value, np.inf), np.where(ok[:, None], grad, 0.0)

    def _evaluate(self, theta):
        d, n, batch = self.d, self.n, len(theta)
        # (1/l_1^2, ..., 1/l_d^2, s2): the factors of dK/dtheta_j = (Kf * D_j) e_j
        e = np.exp(theta * self.exponents)  # B x (d + 1)
        kf = np.exp(e[:, :d] @ self.neg_half_dist).reshape(batch, n, n)
        K = kf + e[:, d, None, None] * self.eye
        factor = cholesky(torch.from_numpy(K))
        k_inv = torch.cholesky_inverse(factor.chol).numpy()
        chol_diag = factor.chol.numpy()[:, self.diagonal, self.diagonal]
        alpha = k_inv @ self.z  # B x n
        w = alpha[:, :, None] * alpha[:, None, :] - k_inv  # a a^T - K^-1
        grad = theta / PRIOR_VARIANCE - 0.5 * ((w * kf).reshape(batch, -1) @ self.derivatives) * e
        value = (
            0.5 * (alpha @ self.z)
            + np.log(chol_diag).sum(-1)
            + (theta * theta).sum(-1) / (2 * PRIOR_VARIANCE)
            + self.constant
        )
        ok = factor.ok.numpy() & np.isfinite(value) & np.isfinite(grad).all(-1)
        return value, grad, ok
