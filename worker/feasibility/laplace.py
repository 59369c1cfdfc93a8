"""Laplace's approximation of the failure model's latent posterior: the mode by Newton's method
(GPML Algorithm 3.1) and the approximate log marginal likelihood there."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import linalg

from fbgp_al.worker.feasibility.likelihoods import LIKELIHOOD, _cholesky, likelihood_terms

# Newton for the mode: stop when the objective rises by less than this (as scikit-learn)
NEWTON_TOL = 1e-10
NEWTON_MAX = 100
HALVINGS = 30


@dataclass
class Mode:
    """The Laplace approximation at fixed hyperparameters: the mode ``f_hat = K a``, the
    likelihood's terms there, ``sqrt(W)``, ``L = chol(B)`` and the approximate log marginal
    likelihood ``log q(y | X)`` (GPML eq. 3.32)."""

    f: np.ndarray
    a: np.ndarray
    log_lik: float
    grad: np.ndarray
    W: np.ndarray
    third: np.ndarray
    sW: np.ndarray
    L: np.ndarray
    log_marginal: float
    iterations: int


def _at(
    K: np.ndarray, y: np.ndarray, f: np.ndarray, a: np.ndarray, likelihood: str, iterations: int = 0
) -> Mode:
    log_lik, grad, W, third = likelihood_terms(f, y, likelihood)
    sW = np.sqrt(W)
    L = _cholesky(np.eye(len(f)) + sW[:, None] * K * sW[None, :])
    log_q = -0.5 * float(a @ f) + log_lik - float(np.log(np.diag(L)).sum())
    return Mode(
        f=f,
        a=a,
        log_lik=log_lik,
        grad=grad,
        W=W,
        third=third,
        sW=sW,
        L=L,
        log_marginal=log_q,
        iterations=iterations,
    )


def posterior_mode(
    K: np.ndarray, y: np.ndarray, likelihood: str = LIKELIHOOD, a0: np.ndarray | None = None
) -> Mode:
    """GPML Algorithm 3.1: Newton's method on ``Psi(f) = log p(y | f) - f' K^-1 f / 2`` in the
    variable ``a = K^-1 f`` (no inverse of ``K``, which duplicates make singular), each step
    halved while ``Psi`` does not rise. ``a0``: a start (a previous mode's ``a``, when the
    hyperparameters moved a little); ``Psi`` is concave, so any start reaches the same mode."""
    n = len(y)
    a = np.zeros(n) if a0 is None else np.array(a0, dtype=np.float64)
    f = K @ a
    psi = -0.5 * float(a @ f) + likelihood_terms(f, y, likelihood)[0]
    if a0 is not None and not psi > likelihood_terms(np.zeros(n), y, likelihood)[0]:
        a, f = np.zeros(n), np.zeros(n)
        psi = likelihood_terms(f, y, likelihood)[0]
    iterations = 0
    for iterations in range(1, NEWTON_MAX + 1):  # noqa: B007
        _, grad, W, _ = likelihood_terms(f, y, likelihood)
        sW = np.sqrt(W)
        L = _cholesky(np.eye(n) + sW[:, None] * K * sW[None, :])
        b = W * f + grad
        c = linalg.cho_solve((L, True), sW * (K @ b))
        step = b - sW * c - a
        for _ in range(HALVINGS):
            a_new = a + step
            f_new = K @ a_new
            psi_new = -0.5 * float(a_new @ f_new) + likelihood_terms(f_new, y, likelihood)[0]
            if psi_new >= psi:
                break
            step = 0.5 * step
        else:
            break  # no step raises Psi any more: at the mode to rounding
        rise = psi_new - psi
        a, f, psi = a_new, f_new, psi_new
        if rise < NEWTON_TOL:
            break
    return _at(K, y, f, a, likelihood, iterations)
