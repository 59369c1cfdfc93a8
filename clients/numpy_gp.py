"""The GP an exported model predicts with, in numpy alone: the service's (``worker/gp.py``)
ARD RBF kernel of unit scale, its Cholesky factors with the worker's jitter, and GPs of many
hyperparameter sets conditioned on the labels, factorized once (:class:`Fitted`)."""

from __future__ import annotations

import numpy as np

# Jitter added to the diagonal, in turn, when a Cholesky fails (worker.gp.JITTERS).
JITTERS = (1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2)

# Float64 elements: of a chunk's kernel (draws x labels x candidates, 2 MB: small enough that
# the kernel, its product with the factors and their squares stay in the processor's cache),
# of the draws' factors fitted together (draws x labels^2, 128 MB), and of a block's
# predictions (draws x candidates, 16 MB).
CHUNK_ELEMENTS = 1 << 18
FIT_ELEMENTS = 1 << 24
BLOCK_ELEMENTS = 1 << 21


def augmented(u: np.ndarray, lengthscale: np.ndarray, left: bool) -> np.ndarray:
    """The points ``u`` (``n x d``) scaled by each set's ``lengthscale`` (``B x d``) and
    augmented with their half squared norms and ones (``B x n x (d + 2)``): the product of a
    ``left`` and a right one is minus half the squared distances (``worker.gp.rbf``'s)."""
    a = u[None] / lengthscale[:, None, :]
    half, ones = -0.5 * (a * a).sum(-1, keepdims=True), np.ones_like(a[..., :1])
    return np.concatenate([a, half, ones] if left else [a, ones, half], -1)


def rbf_of(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The kernel of augmented points (:func:`augmented`): ``B x n x m``, computed in place."""
    out = a @ b.transpose(0, 2, 1)
    np.minimum(out, 0.0, out=out)  # clamped at zero distance
    return np.exp(out, out=out)


def rbf(u1: np.ndarray, u2: np.ndarray, lengthscale: np.ndarray) -> np.ndarray:
    """ARD RBF kernel of unit scale: ``u1`` ``n x d``, ``u2`` ``m x d``, ``lengthscale``
    ``B x d`` -> ``B x n x m``, as ``worker.gp.rbf`` computes it (one product of the scaled
    inputs augmented with their half squared norms, clamped at zero distance)."""
    return rbf_of(augmented(u1, lengthscale, True), augmented(u2, lengthscale, False))


def factor_or_none(K: np.ndarray) -> np.ndarray | None:
    """The lower Cholesky factor of ``K``, or None where it fails (not positive definite, or
    not finite: LAPACK lets NaN through, torch's ``cholesky_ex`` does not)."""
    try:
        chol = np.linalg.cholesky(K)
    except np.linalg.LinAlgError:
        return None
    return chol if np.isfinite(chol).all() else None


def cholesky(K: np.ndarray) -> np.ndarray:
    """Lower Cholesky factors of ``K`` (``B x n x n``); a member that fails is retried with
    growing jitter (:data:`JITTERS`), and one that no jitter helps gets the identity (as
    ``worker.gp.cholesky``)."""
    chol = factor_or_none(K)
    if chol is not None:
        return chol
    eye = np.eye(K.shape[-1])
    chol = np.empty_like(K)
    for i, member in enumerate(K):
        for jitter in (0.0, *JITTERS):
            factor = factor_or_none(member + jitter * eye if jitter else member)
            if factor is not None:
                chol[i] = factor
                break
        else:
            chol[i] = eye
    return chol


class Fitted:
    """GPs of ``B`` hyperparameter sets conditioned on the labels (``u``, ``z``, known noise
    ``noise_z``, all in the GP's units), factorized once: in groups of sets whose work fits
    ``FIT_ELEMENTS``, each group's ``L^-1`` kept (``B x n x n`` in all), below ``K^-1 z``
    (``alpha``) in one array, so that one product gives a point's mean and variance."""

    def __init__(self, u, z, noise_z, lengthscale, s2):
        self.u, self.lengthscale, self.s2 = u, lengthscale, s2
        n, batch = len(z), len(s2)
        self.factors = np.empty((batch, n + 1, n))  # alpha' above L^-1
        self.alpha, self.chol_inv = self.factors[:, 0, :], self.factors[:, 1:, :]
        self._left = augmented(u, lengthscale, True)
        per = max(1, FIT_ELEMENTS // max(1, n * n))
        for g in range(0, batch, per):
            rows = slice(g, g + per)
            K = rbf(u, u, lengthscale[rows])
            K += np.diag(noise_z)[None] if noise_z is not None else 0.0
            K += s2[rows, None, None] * np.eye(n)[None]
            chol = cholesky(K)
            del K
            eye = np.broadcast_to(np.eye(n), chol.shape)
            self.chol_inv[rows] = np.linalg.solve(chol, eye)  # L^-1: variances in one product
            w = np.linalg.solve(chol, np.broadcast_to(z[None, :, None], (len(chol), n, 1)))
            self.alpha[rows] = np.linalg.solve(chol.transpose(0, 2, 1), w)[..., 0]  # K^-1 z

    def predict(self, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and variance of z (nugget included) at ``cand`` (``c x d``): ``B x c`` each,
        chunk by chunk of candidates (``CHUNK_ELEMENTS`` kernel values at a time): each chunk's
        kernel ``k*`` (``B x n x c``) in one product, then ``[alpha'; L^-1] k*`` in another
        (the mean its first row, the variance ``1 - |L^-1 k*|^2 + s2``)."""
        batch, n = self.chol_inv.shape[:2]
        step = max(1, CHUNK_ELEMENTS // (batch * max(n, 1)))
        mean, var = np.empty((batch, len(cand))), np.empty((batch, len(cand)))
        for i in range(0, len(cand), step):
            right = augmented(cand[i : i + step], self.lengthscale, False)
            v = self.factors @ rbf_of(self._left, right)  # B x (n + 1) x c
            mean[:, i : i + step] = v[:, 0, :]
            np.square(v[:, 1:, :], out=v[:, 1:, :])
            latent = np.maximum(1.0 - v[:, 1:, :].sum(-2), 0.0)
            var[:, i : i + step] = latent + self.s2[:, None]
        return mean, var
