"""An output modeled on the log scale (``"transform": "log"``), back in its own units: numpy
only, so that the workers' answers and the SDK's :class:`~clients.metamodel.Metamodel` compute
them with the same code.

The GP models ``log y``. A GP's predictive distribution of ``log y`` at a point is
``N(mu, s2)`` (``mu = y_mean + y_std m``, ``s2 = y_std^2 v`` from its standardized ``m``, ``v``),
so ``y`` is lognormal:

    mean      exp(mu + s2 / 2)
    variance  (exp(s2) - 1) exp(2 mu + s2)
    median    exp(mu);  quantile p: exp(mu + z_p sqrt(s2))

The mixture of the posterior draws' GPs (equal weights) is a mixture of lognormals: its mean is
the mean of the draws' means, its variance the mean of their variances plus the population
variance of their means (each draw's lognormal moments first, then the mixture's, as
``/predict`` combines the draws of an output modeled as is). Its quantiles are the mixture's
quantiles of ``log y`` mapped by ``exp``, exact since ``exp`` is increasing; those of
``log y`` are found by a safeguarded Halley iteration on the mixture's CDF.

A density of ``y`` is the density of ``log y`` times the Jacobian ``1 / y``:
``log p(y) = log N(log y; mu, s2) - log y``.

A moment beyond float64's range (a mean or variance over 1.8e308, far outside the labels) is
reported as the largest float64, so that every answer stays finite JSON.
"""

from __future__ import annotations

import math

import numpy as np

from fbgp_al.worker.vocabulary.sobol import erf

# the standard normal's 0.975 quantile: the central 95% interval is exp(mu -+ Z95 sqrt(s2))
Z95 = 1.959963984540054
LEVEL = 0.95
_MAX = float(np.finfo(np.float64).max)
_LOG_MAX = math.log(_MAX)
# the quantile's Halley iteration: its relative tolerance on log y, and its most steps
TOLERANCE = 1e-13
MAX_STEPS = 200
_SQRT_2PI = math.sqrt(2 * math.pi)


def _exp(x) -> np.ndarray:
    """``exp(x)``, at most the largest float64."""
    return np.exp(np.minimum(x, _LOG_MAX))


def _finite(x: np.ndarray) -> np.ndarray:
    return np.minimum(x, _MAX)


def moments(mu, s2) -> tuple[np.ndarray, np.ndarray]:
    """The lognormal's mean and variance, elementwise: ``y = exp(N(mu, s2))``."""
    mu, s2 = np.asarray(mu, dtype=np.float64), np.asarray(s2, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        mean = _exp(mu + s2 / 2)
        variance = _finite(np.expm1(np.minimum(s2, _LOG_MAX)) * _exp(2 * mu + s2))
    return mean, variance


def mixture_moments(mu, s2) -> tuple[np.ndarray, np.ndarray]:
    """The mean and variance of the equal-weight mixture of lognormals ``exp(N(mu_j, s2_j))``
    (``B x m``: draws by points) at each point (``m``): the mean of their means, and the mean of
    their variances plus the population variance of their means."""
    means, variances = moments(mu, s2)
    with np.errstate(over="ignore", invalid="ignore"):
        mean = _finite(means.mean(0))
        spread = np.square(means - mean).mean(0)
        variance = _finite(variances.mean(0) + spread)
    return mean, np.nan_to_num(variance, nan=_MAX)


def normal_cdf(x) -> np.ndarray:
    """The standard normal's CDF, elementwise, in numpy alone (Cephes' ``erf``)."""
    return 0.5 * (1.0 + erf(np.asarray(x, dtype=np.float64) / math.sqrt(2.0)))


def mixture_quantile(mu, s2, z: float) -> np.ndarray:
    """The quantile of ``log y`` under the equal-weight mixture of ``N(mu_j, s2_j)``
    (``B x m``) at each point (``m``), at the probability ``p = Phi(z)`` (``z``: the standard
    normal's quantile, e.g. ``Z95``): the root of ``F(q) = mean_j Phi((q - mu_j) / s_j) - p``,
    which lies between the draws' own quantiles ``mu_j + z s_j``. Halley's steps (``F'`` and
    ``F''`` come with the densities ``F`` needs) from the quantile of the normal of the
    mixture's mean and variance, a bisection wherever one leaves that bracket, until a step is
    within ``TOLERANCE`` of ``1 + |q|``, or a Halley step ``d`` with ``d^3 / s_min^2`` within it
    (the error left after a step of Halley's cubic convergence, ``s_min`` the narrowest
    draw's standard deviation); the points
    still moving are carried, compacted, from step to step."""
    mu = np.atleast_2d(np.asarray(mu, dtype=np.float64))
    s = np.sqrt(np.maximum(np.atleast_2d(np.asarray(s2, dtype=np.float64)), 1e-300))
    own = mu + z * s
    lo, hi = own.min(0), own.max(0)
    # from the quantile of the normal with the mixture's moments
    q = np.clip(mu.mean(0) + z * np.sqrt((s * s).mean(0) + mu.var(0)), lo, hi)
    p = float(normal_cdf(z))
    active = np.flatnonzero(hi > lo)
    mu_a, s_a = mu[:, active], s[:, active]
    for _ in range(MAX_STEPS):
        if not len(active):
            break
        qa, a, b = q[active], lo[active], hi[active]
        t = (qa - mu_a) / s_a
        f = normal_cdf(t).mean(0) - p
        density = np.exp(-0.5 * t * t) / s_a
        slope = density.mean(0) / _SQRT_2PI
        curve = -(density * t / s_a).mean(0) / _SQRT_2PI
        a = np.where(f < 0, qa, a)
        b = np.where(f >= 0, qa, b)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            step = 2.0 * f * slope / (2.0 * slope * slope - f * curve)
            new = qa - step
        inside = np.isfinite(new) & (new >= a) & (new <= b)
        new = np.where(inside, new, 0.5 * (a + b))
        moved = np.abs(new - qa)
        scale = 1.0 + np.abs(new)
        # Halley's error after a step of d is about d^3 / w^2, w the narrowest draw's width
        tiny = moved**3 <= TOLERANCE * scale * np.square(s_a.min(0))
        done = (moved <= TOLERANCE * scale) | (inside & tiny) | (f == 0)
        lo[active], hi[active], q[active] = a, b, np.where(f == 0, qa, new)
        keep = ~done
        active, mu_a, s_a = active[keep], mu_a[:, keep], s_a[:, keep]
    return q


def predictive(mu, s2) -> dict[str, np.ndarray]:
    """One GP's predictive of ``y`` at each point from that of ``log y`` (``m`` each): its
    ``mean``, ``variance``, ``median`` and central 95% interval ``lower``, ``upper``."""
    mu, s2 = np.asarray(mu, dtype=np.float64), np.asarray(s2, dtype=np.float64)
    mean, variance = moments(mu, s2)
    s = np.sqrt(s2)
    return {
        "mean": mean,
        "variance": variance,
        "median": _exp(mu),
        "lower": _exp(mu - Z95 * s),
        "upper": _exp(mu + Z95 * s),
    }


def mixture(mu, s2) -> dict[str, np.ndarray]:
    """The draws' mixture's predictive of ``y`` at each point from the draws' of ``log y``
    (``B x m``): ``mixture_mean``, ``mixture_variance``, ``mixture_median`` and its central 95%
    interval ``mixture_lower``, ``mixture_upper`` (``m`` each)."""
    mean, variance = mixture_moments(mu, s2)
    return {
        "mixture_mean": mean,
        "mixture_variance": variance,
        "mixture_median": _exp(mixture_quantile(mu, s2, 0.0)),
        "mixture_lower": _exp(mixture_quantile(mu, s2, -Z95)),
        "mixture_upper": _exp(mixture_quantile(mu, s2, Z95)),
    }


def predictions(y_mean: float, y_std: float, mean, var, draws) -> dict[str, np.ndarray]:
    """A log output's predictions in its units (``/predict``'s and the ``Metamodel``'s keys,
    ``m`` each): the mode GP's :func:`predictive` from its ``mean`` and ``var`` of
    standardized ``log y`` (``m``), and the draws' :func:`mixture` from theirs, ``draws``
    consecutive chunks of the points ``(B x c, B x c)``."""
    out = predictive(y_mean + y_std * np.asarray(mean), y_std**2 * np.asarray(var))
    parts = [mixture(y_mean + y_std * np.asarray(m), y_std**2 * np.asarray(v)) for m, v in draws]
    for key in (
        "mixture_mean",
        "mixture_variance",
        "mixture_median",
        "mixture_lower",
        "mixture_upper",
    ):
        out[key] = np.concatenate([p[key] for p in parts]) if parts else np.empty(0)
    return out


def log_density(y, mu, s2) -> np.ndarray:
    """``log p(y)`` of a lognormal ``exp(N(mu, s2))``, elementwise: the normal density of
    ``log y`` and the Jacobian ``-log y``."""
    log_y = np.log(np.asarray(y, dtype=np.float64))
    s2 = np.asarray(s2, dtype=np.float64)
    return -0.5 * ((log_y - mu) ** 2 / s2 + np.log(2 * math.pi * s2)) - log_y
