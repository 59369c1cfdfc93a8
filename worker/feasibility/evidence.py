"""The failure model's hyperparameters: the approximate log marginal likelihood (Laplace's or
EP's) with its gradient, the weak log-priors, and their maximum (L-BFGS-B from seeded starts)."""

from __future__ import annotations

import math

import numpy as np
from scipy import linalg, optimize

from fbgp_al.worker.feasibility.ep import expectation_propagation
from fbgp_al.worker.feasibility.laplace import posterior_mode
from fbgp_al.worker.feasibility.likelihoods import (
    INFERENCES,
    LIKELIHOOD,
    LOG_SQRT_2PI,
    _array,
    kernel,
)

EVIDENCE = "laplace"  # the approximate marginal likelihood that the hyperparameters maximize
# Log-priors and bounds of the hyperparameters (natural logs; inputs in the unit cube). A
# simulator's failures are a function of its inputs, and a failure region is a region, so the
# priors say so (docs/benchmarks.md, "A crash region from a few crashes"): the signal and the
# constant mean's variances are centred on a latent sd of 10, against the probit's unit noise
# (a run's outcome nearly fixed by its inputs; centred on an sd of 2, one failure among successes
# read as chance and left P(success) at 0.47 to 0.59 at the failed point itself), scaled by
# 1.702^2 for the logistic link, whose latent is ~1.7x as wide; the lengthscales' prior is
# LogNormal(log 0.3, 0.75), 95% of its mass between 0.07 and 1.3 of the unit cube. The regression
# GP's LogNormal(0, sqrt 3) let two failures be fitted as a slab 0.15 wide in one input, the
# failure speaking for almost nothing beside it; centred on 1, the prior let forty successes
# 0.4 to 0.7 away speak for ground no run had come near, where the later failures of a 4-input
# campaign fell at weights near 1 (docs/benchmarks.md, "A shorter lengthscale prior").
LOG_LENGTHSCALE_PRIOR = (math.log(0.3), 0.75)
# A choice input's one-hot features: LogNormal(log 4, 0.5), 95% of its mass between 1.5 and 10.7,
# so that a failure at one value speaks for the others (two values' features are sqrt 2 apart:
# correlation exp(-1/16) at 4, exp(-1) at 1) until runs at the others say otherwise. With the
# numeric inputs' prior, the second failure of a campaign fell at another value of its choice,
# weighed 0.89 to 0.97 at its point (docs/benchmarks.md, "Where the second failure falls").
LOG_CHOICE_LENGTHSCALE_PRIOR = (math.log(4.0), 0.5)
LOG_VARIANCE_PRIOR = (math.log(100.0), 1.5)
LOG_BIAS_PRIOR = (math.log(100.0), 1.5)
LOGISTIC_SCALE = 2 * math.log(1.702)
LOG_LENGTHSCALE_BOUNDS = (math.log(1e-2), math.log(1e2))
LOG_VARIANCE_BOUNDS = (math.log(1e-3), math.log(1e4))
RESTARTS = 3  # L-BFGS-B starts: the prior's centre, then draws from the prior (seeded)


def _dkernels(u: np.ndarray, lengthscale: np.ndarray, variance: float, bias: float):
    """``K`` and its derivatives with respect to ``(log l_1..d, log s2, log b2)``."""
    se = kernel(u, u, lengthscale, variance)
    derivs = [
        se * ((u[:, j, None] - u[None, :, j]) / lengthscale[j]) ** 2 for j in range(u.shape[1])
    ]
    derivs += [se, np.full_like(se, bias)]
    return se + bias, derivs


def log_marginal(
    u,
    success,
    lengthscale,
    variance: float,
    bias: float = 0.0,
    likelihood: str = LIKELIHOOD,
    gradient: bool = False,
    start=None,
    inference: str = "laplace",
):
    """The approximate log marginal likelihood at fixed hyperparameters, and with ``gradient``
    its gradient with respect to ``(log l_1..d, log s2, log b2)``. Returns ``(value, gradient or
    None, approximation)``: a :class:`Mode` or :class:`Sites`. ``start``: the previous
    approximation (its ``a``, or its sites), to start from.

    Laplace: ``log q(y | X, theta)`` (GPML eq. 3.32), its gradient by GPML Algorithm 5.1 (the
    explicit term and the one through the mode's dependence on ``theta``). EP (probit only):
    ``log Z_EP``, its gradient by GPML eq. 5.27 (the sites at their fixed point, the implicit
    terms vanish)."""
    u, y = _array(u, 2), 2.0 * np.asarray(success, dtype=np.float64) - 1.0
    lengthscale = np.broadcast_to(np.asarray(lengthscale, dtype=np.float64), (u.shape[1],))
    if inference not in INFERENCES:
        raise ValueError(f"inference must be one of {INFERENCES}, not {inference!r}")
    if inference == "ep" and likelihood != "probit":
        raise ValueError("expectation propagation is implemented for the probit likelihood")
    K, derivs = _dkernels(u, lengthscale, variance, bias)
    if inference == "ep":
        approx = expectation_propagation(K, y, *(start if start is not None else (None, None)))
        alpha = approx.alpha
    else:
        approx = posterior_mode(K, y, likelihood, start)
        alpha = approx.a
    if not gradient:
        return approx.log_marginal, None, approx
    sW, L = approx.sW, approx.L
    R = sW[:, None] * linalg.cho_solve((L, True), np.diag(sW))  # S^1/2 B^-1 S^1/2
    out = np.array([0.5 * float(alpha @ dK @ alpha) - 0.5 * float((R * dK).sum()) for dK in derivs])
    if inference == "laplace":
        C = linalg.solve_triangular(L, sW[:, None] * K, lower=True)
        # d(-log|B| / 2) / df_i = [(K^-1 + W)^-1]_ii (third derivative of log p) / 2, as dW / df
        # is minus the third derivative (GPML eq. 5.23 and line 7 of Algorithm 5.1 write the
        # sign for the derivative of -log p; scikit-learn's code agrees with this one)
        s2 = 0.5 * (np.diag(K) - (C * C).sum(0)) * approx.third
        for j, dK in enumerate(derivs):
            b = dK @ approx.grad
            out[j] += float(s2 @ (b - K @ (R @ b)))
    return approx.log_marginal, out, approx


def _prior(likelihood: str, d: int, choice=None):
    """Centres, scales and bounds of the log-hyperparameters ``(log l_1..d, log s2, log b2)``.
    ``choice``: which of the ``d`` features are a choice input's one-hot columns (none if
    None); their lengthscales' prior is ``LOG_CHOICE_LENGTHSCALE_PRIOR``."""
    shift = LOGISTIC_SCALE if likelihood == "logistic" else 0.0
    one_hot = np.zeros(d, dtype=bool) if choice is None else np.asarray(choice, dtype=bool)
    if one_hot.shape != (d,):
        raise ValueError(f"choice marks {one_hot.size} features, the runs have {d}")
    lengths = np.where(one_hot, LOG_CHOICE_LENGTHSCALE_PRIOR[0], LOG_LENGTHSCALE_PRIOR[0])
    spreads = np.where(one_hot, LOG_CHOICE_LENGTHSCALE_PRIOR[1], LOG_LENGTHSCALE_PRIOR[1])
    centre = np.r_[lengths, LOG_VARIANCE_PRIOR[0] + shift, LOG_BIAS_PRIOR[0] + shift]
    scale = np.r_[spreads, LOG_VARIANCE_PRIOR[1], LOG_BIAS_PRIOR[1]]
    bounds = [LOG_LENGTHSCALE_BOUNDS] * d + [LOG_VARIANCE_BOUNDS] * 2
    return centre, scale, bounds


def log_prior(theta: np.ndarray, likelihood: str = LIKELIHOOD, choice=None) -> float:
    """The weak Normal log-prior density of ``(log l_1..d, log s2, log b2)`` (``choice``: as
    :func:`_prior`'s)."""
    centre, scale, _ = _prior(likelihood, len(theta) - 2, choice)
    z = (theta - centre) / scale
    return float(-0.5 * (z * z).sum() - np.log(scale).sum() - len(z) * LOG_SQRT_2PI)


def hyperparameters(
    u,
    success,
    seed: int = 0,
    likelihood: str = LIKELIHOOD,
    restarts: int = RESTARTS,
    inference: str = EVIDENCE,
    choice=None,
) -> np.ndarray:
    """The log-hyperparameters ``(log l_1..d, log s2, log b2)`` at the maximum of the
    approximate ``log p(y | X, theta) + log p(theta)`` of ``inference``: L-BFGS-B within the
    bounds, from the prior's centre and ``restarts - 1`` seeded draws from the prior; the best
    end wins. Each evaluation starts from the previous one's approximation. ``choice``: the
    features that are a choice input's one-hot columns (:func:`_prior`)."""
    u = _array(u, 2)
    centre, scale, bounds = _prior(likelihood, u.shape[1], choice)
    lo, hi = np.array(bounds).T
    rng = np.random.default_rng(seed)
    starts = [centre] + [
        np.clip(centre + scale * rng.standard_normal(len(centre)), lo, hi)
        for _ in range(max(restarts, 1) - 1)
    ]
    warm = {"start": None}

    def objective(theta):
        ell = np.exp(theta[:-2])
        try:
            value, grad, approx = log_marginal(
                u,
                success,
                ell,
                math.exp(theta[-2]),
                math.exp(theta[-1]),
                likelihood,
                True,
                warm["start"],
                inference,
            )
        except ValueError:
            return 1e300, np.zeros_like(theta)
        if not (np.isfinite(value) and np.isfinite(grad).all()):
            return 1e300, np.zeros_like(theta)
        warm["start"] = approx.a if inference == "laplace" else (approx.tau, approx.nu)
        z = (theta - centre) / scale
        return -(value - 0.5 * float(z @ z)), -(grad - z / scale)

    best, best_value = centre, math.inf
    for start in starts:
        warm["start"] = None
        result = optimize.minimize(
            objective, start, jac=True, method="L-BFGS-B", bounds=bounds, options={"maxiter": 200}
        )
        if np.isfinite(result.fun) and result.fun < best_value:
            best, best_value = np.asarray(result.x, dtype=np.float64), float(result.fun)
    return best
