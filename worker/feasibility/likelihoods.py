"""The failure model's building blocks: its kernel, the likelihoods of a run's outcome given
the latent (probit, logistic) with their derivatives, the stable Cholesky factor of ``B``, and
the predictive probability of success (:mod:`worker.feasibility`)."""

from __future__ import annotations

import math

import numpy as np
from scipy import linalg, special

LIKELIHOODS = ("probit", "logistic")
LIKELIHOOD = "probit"
INFERENCES = ("laplace", "ep")
INFERENCE = "ep"  # the posterior that predicts
# Jitter added to B's diagonal when its Cholesky fails, as worker.gp.JITTERS (B >= I, so only a
# non-finite kernel can need it).
JITTERS = (1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2)
# Candidates predicted at once: the n x chunk cross-kernel and its solve stay ~32 MB
CHUNK_ELEMENTS = 1 << 22
LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _array(values, ndim: int) -> np.ndarray:
    out = np.array(values, dtype=np.float64)
    return out.reshape(len(out), -1) if ndim == 2 and out.ndim == 1 else out


def kernel(
    u1: np.ndarray, u2: np.ndarray, lengthscale, variance: float, bias: float = 0.0
) -> np.ndarray:
    """``s2 exp(-|(u1 - u2) / l|^2 / 2) + b2`` between ``u1`` (``n x d``) and ``u2`` (``m x d``):
    ``n x m``; squared distances clamped at zero against rounding."""
    a, b = u1 / lengthscale, u2 / lengthscale
    sq = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * (a @ b.T)
    return variance * np.exp(-0.5 * np.maximum(sq, 0.0)) + bias


def likelihood_terms(f: np.ndarray, y: np.ndarray, likelihood: str = LIKELIHOOD):
    """For classes ``y`` in {-1, +1} (+1: success) at latents ``f``: ``log p(y | f)`` summed, and
    per point its first derivative, ``W = -`` its second and its third (GPML 3.4, 5.5.1)."""
    if likelihood == "probit":
        z = y * f
        log_cdf = special.log_ndtr(z)
        r = np.exp(-0.5 * z * z - LOG_SQRT_2PI - log_cdf)  # N(z) / Phi(z), stable for z << 0
        grad = y * r
        W = np.maximum(r * (r + z), 0.0)
        third = y * r * ((z + r) * (2.0 * r + z) - 1.0)
        return float(log_cdf.sum()), grad, W, third
    if likelihood == "logistic":
        pi = special.expit(f)
        log_p = -np.logaddexp(0.0, -y * f)
        W = pi * (1.0 - pi)
        return float(log_p.sum()), 0.5 * (y + 1.0) - pi, W, -W * (1.0 - 2.0 * pi)
    raise ValueError(f"likelihood must be one of {LIKELIHOODS}, not {likelihood!r}")


def _cholesky(B: np.ndarray) -> np.ndarray:
    """Lower Cholesky factor of ``B``, retrying with growing jitter (``JITTERS``); a ``B`` that no
    jitter makes positive definite (non-finite entries) is a ValueError, never a NaN model."""
    for jitter in (0.0, *JITTERS):
        try:
            return linalg.cholesky(B + jitter * np.eye(len(B)), lower=True, check_finite=True)
        except (linalg.LinAlgError, ValueError):
            continue
    raise ValueError("the failure model's B = I + W^1/2 K W^1/2 has no Cholesky factor")


def predictive_probability(mean, var, likelihood: str = LIKELIHOOD) -> np.ndarray:
    """``P(success) = E[sigmoid(f)]`` for ``f ~ N(mean, var)``: probit in closed form,
    ``Phi(m / sqrt(1 + v))``; logistic by the trapezoid rule over ``f = m + sd x``, ``x`` in
    [-9, 9], with a step of ``min(0.2, 0.5 / sd)``: the sigmoid's poles lie ``pi / sd`` off the
    real axis in ``x``, so the rule's error is below ``exp(-4 pi^2)`` at any variance."""
    mean, var = np.asarray(mean, dtype=np.float64), np.maximum(np.asarray(var, np.float64), 0.0)
    if likelihood == "probit":
        return special.ndtr(mean / np.sqrt(1.0 + var))
    if likelihood != "logistic":
        raise ValueError(f"likelihood must be one of {LIKELIHOODS}, not {likelihood!r}")
    shape, mean, sd = mean.shape, mean.reshape(-1), np.sqrt(var).reshape(-1)
    step = min(0.2, 0.5 / max(float(sd.max(initial=0.0)), 1e-300))
    x = step * np.arange(-math.ceil(9.0 / step), math.ceil(9.0 / step) + 1)
    weights = np.exp(-0.5 * x * x)
    weights /= weights.sum()
    out = np.empty(len(mean))
    chunk = max(1, CHUNK_ELEMENTS // len(x))
    for i in range(0, len(mean), chunk):
        part = slice(i, i + chunk)
        out[part] = special.expit(mean[part, None] + sd[part, None] * x) @ weights
    return out.reshape(shape)
