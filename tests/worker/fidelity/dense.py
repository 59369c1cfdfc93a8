"""The autoregressive multi-fidelity GP written separately from :mod:`worker.fidelity.model`,
in numpy: each covariance by the model's recursion (``f_t = rho_{t-1} f_{t-1} + delta_t``), not
the closed sum, and the predictions by scipy's Cholesky solves."""

import numpy as np
from scipy import linalg


def rbf(a, b, lengthscale, variance):
    d = (a[:, None, :] - b[None, :, :]) / lengthscale
    return variance * np.exp(-0.5 * (d * d).sum(-1))


def cov(x, t, y, s, ell, v, rho):
    """``Cov(f_t(x), f_s(y))`` for one pair, by the recursion."""
    if t > s:
        return rho[t - 1] * cov(x, t - 1, y, s, ell, v, rho)
    if s > t:
        return rho[s - 1] * cov(x, t, y, s - 1, ell, v, rho)
    own = rbf(x[None], y[None], ell[t], v[t])[0, 0]
    return own if t == 0 else rho[t - 1] ** 2 * cov(x, t - 1, y, t - 1, ell, v, rho) + own


def matrix(xa, ta, xb, tb, ell, v, rho):
    return np.array(
        [
            [cov(x, t, y, s, ell, v, rho) for y, s in zip(xb, tb, strict=True)]
            for x, t in zip(xa, ta, strict=True)
        ]
    )


def predict(u, t, z, xs, level, ell, v, rho, noise):
    """The latent ``f_level``'s posterior mean and variance at ``xs``."""
    K = matrix(u, t, u, t, ell, v, rho) + np.diag(np.asarray(noise)[t])
    ts = np.full(len(xs), level)
    k = matrix(u, t, xs, ts, ell, v, rho)
    c = linalg.cho_factor(K, lower=True)
    mean = k.T @ linalg.cho_solve(c, z)
    var = np.diagonal(matrix(xs, ts, xs, ts, ell, v, rho)) - (k * linalg.cho_solve(c, k)).sum(0)
    return mean, var
