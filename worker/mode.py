"""The draw that stands for a posterior's mode (for ALM and predictions): the densest draw
under a Gaussian KDE of the log-hyperparameters (:func:`posterior_mode_index`), or under the
paper's code's KDE of the raw values (:func:`raw_kde_mode_index`); :func:`mode_index` picks by
rule."""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp
from scipy.stats import gaussian_kde

# The mode's KDE looks at this many draws at most (the service's ``limit_mode_draws``): its cost
# is quadratic in the draws (320,000 draws took 24 minutes), so more are subsampled, seeded.
MODE_DRAWS = 5_000

MODE_RULES = ("kde", "kde-raw")
RAW_KDE_BANDWIDTH = 0.3


def mode_index(
    log_draws: np.ndarray,
    rule: str = "kde",
    limit: int = MODE_DRAWS,
    seed: int = 0,
    prior_mean=None,
) -> int:
    """Index of the draw (``S x P``, log space) that stands for the posterior's mode.

    - ``kde``: :func:`posterior_mode_index`, the densest draw under scipy's Gaussian KDE of the
      log-hyperparameters (Scott's bandwidth).
    - ``kde-raw``: the paper's code's rule (``models/base_pyro_gp.py``): the densest of all draws
      under an isotropic Gaussian KDE of bandwidth 0.3 on the raw values (lengthscales, noise
      variance), as scikit-learn's ``KernelDensity(kernel="gaussian", bandwidth=0.3)`` scores
      them. The lengthscales are those of the inputs the priors are stated for: ``exp(theta -
      prior_mean)`` (see :class:`~worker.potential.GPPotential`).

    Either rule looks at ``limit`` draws at most (its cost grows as their square): of more, a
    seeded sample without replacement.
    """
    if rule == "kde":
        return posterior_mode_index(log_draws, limit, seed)
    if rule != "kde-raw":
        raise ValueError(f"unknown mode rule {rule!r}; known: {', '.join(MODE_RULES)}")
    shift = 0.0 if prior_mean is None else np.asarray(prior_mean, dtype=np.float64)
    rows = _mode_rows(len(log_draws), limit, seed)
    return int(rows[raw_kde_mode_index(np.exp(log_draws[rows] - shift))])


def raw_kde_mode_index(values: np.ndarray, bandwidth: float = RAW_KDE_BANDWIDTH) -> int:
    """Index of the row of ``values`` (``S x P``) with the highest isotropic Gaussian KDE
    density of all rows (bandwidth ``bandwidth``); the first of ties. Non-finite rows never win."""
    values = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(values).all(1)
    if not finite.any():
        return 0
    points = values[finite]
    scores = np.empty(len(points))
    for start in range(0, len(points), 256):  # bounded memory: 256 x S x P at a time
        diff = points[start : start + 256, None, :] - points[None, :, :]
        dist = (diff * diff).sum(-1)
        scores[start : start + 256] = logsumexp(-0.5 * dist / bandwidth**2, axis=1)
    return int(np.flatnonzero(finite)[np.argmax(scores)])


def posterior_mode_index(log_draws: np.ndarray, limit: int = MODE_DRAWS, seed: int = 0) -> int:
    """Index of the draw (``S x P``, log space) with the highest Gaussian-KDE density
    (scipy.stats.gaussian_kde, Scott's bandwidth). Of more than ``limit`` draws, ``limit`` drawn
    without replacement (seeded by ``seed``) make the KDE and the mode is the densest of them.
    Draws too degenerate for a KDE (all equal, or a singular covariance) fall back to the first
    draw of the most frequent value."""
    rows = _mode_rows(len(log_draws), limit, seed)
    return int(rows[_densest(log_draws[rows])])


def _mode_rows(size: int, limit: int, seed: int) -> np.ndarray:
    """All ``size`` rows, or of more than ``limit``, ``limit`` drawn without replacement (seeded
    by ``seed``), in order."""
    if size <= max(1, limit):
        return np.arange(size)
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(2,)))
    return np.sort(rng.choice(size, size=max(1, limit), replace=False))


def _densest(log_draws: np.ndarray) -> int:
    try:
        density = gaussian_kde(log_draws.T)(log_draws.T)
    except (np.linalg.LinAlgError, ValueError):
        values, counts = np.unique(log_draws, axis=0, return_counts=True)
        most = values[np.argmax(counts)]
        return int(np.flatnonzero((log_draws == most).all(1))[0])
    return int(np.argmax(density))
