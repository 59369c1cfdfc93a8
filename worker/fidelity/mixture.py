"""The multi-fidelity model's hyperparameters from a Laplace mixture, past a campaign's
``mcmc.laplace_from`` labels, as a single-fidelity campaign's (:mod:`worker.laplace`).

Cheap levels make labels many: a campaign whose runs cost a tenth of the top level's reaches a
few hundred labels after a few dozen expensive runs, where NUTS spends a thousand gradient
evaluations per refit (each an ``n x n`` Cholesky and inverse of the joint covariance). Here the
posterior's modes are found by L-BFGS (warm: from the previous model's modes or its chains' last
draws; cold: from the priors' centre and :data:`SEARCH_STARTS` seeded starts around it, on a
campaign's first mixture and each time its labels have doubled since the last search), each
weighed by its Laplace mass, and the mixture's Student-t draws are resampled by their
Pareto-smoothed importance weights against :class:`worker.fidelity.model.Potential`, widened
once where their ``k`` is above its limit (:func:`worker.laplace.importance_resampled`). A
mixture still above it is not used: the refit samples by NUTS, its chains started from the
mixture's draws (:func:`worker.fitting.fidelity.sample`).
"""

from __future__ import annotations

import time

import numpy as np

from fbgp_al.worker.cold_start import descend
from fbgp_al.worker.fidelity.model import Layout, Potential
from fbgp_al.worker.laplace import (
    Counted,
    importance_resampled,
    mixture_adaptation,
    modes_of,
)

SEARCH_STARTS = 8  # a cold search's seeded starts, beside the priors' centre
SEARCH_ITERATIONS = 200  # L-BFGS iterations from each
START_SPREAD = 1.5  # the starts: uniform within this many prior sds of the centre
BOUND_SDS = 6.0  # the searches keep within this many prior sds of the centre (at 4, the log
# noise of Forrester's labels with noise of sd 0.1, standardized, stopped at the bound)


def search_bounds(layout: Layout) -> list[tuple[float, float]]:
    """The box the mode searches keep to: :data:`BOUND_SDS` prior sds around the priors'
    centre in every hyperparameter."""
    mean, sd = layout.prior_mean(), layout.prior_sd()
    return list(zip(mean - BOUND_SDS * sd, mean + BOUND_SDS * sd, strict=True))


def local_minima(potential: Potential, seed: int) -> list[tuple[float, np.ndarray]] | None:
    """A cold search's minima ``[(U, theta)]``, best first: L-BFGS from the priors' centre and
    from :data:`SEARCH_STARTS` seeded starts around it; None when none is finite."""
    layout = potential.layout
    rng = np.random.default_rng([seed, 13])
    spread = rng.uniform(-START_SPREAD, START_SPREAD, (SEARCH_STARTS, layout.size))
    starts = np.r_[layout.prior_mean()[None], layout.prior_mean() + spread * layout.prior_sd()]
    bounds = search_bounds(layout)
    found = [descend(potential, x, bounds, SEARCH_ITERATIONS) for x in starts]
    found = [(value, x) for value, x in found if value < 1e300]  # descend's 1e300: not finite
    return sorted(found, key=lambda f: f[0]) or None


def mixture_sample(
    potential: Potential, draws: int, seed: int, previous: dict | None, chains: int
) -> tuple[np.ndarray, dict]:
    """``draws`` importance-resampled draws of the mixture at the posterior's modes (warm from
    ``previous``, an ``adaptation``, where it has modes or draws) and their report: the
    mixture's diagnostics (``method`` "laplace", ``khat`` and ``khat_limit``, ``widened``,
    ``importance_ess``, the modes, the evaluations; no R-hat, ESS or divergences), ``start``
    (``warm``, ``cold`` or ``warm+cold``) and ``adaptation``: the modes and the labels of the
    last cold search for the next refit, and a NUTS warm start for ``chains`` chains (each at a
    draw, the draws' variances as inverse mass) for a refit that does not use the mixture."""
    started = time.perf_counter()
    counted = Counted(potential)
    n = len(potential.zn)
    bounds = search_bounds(potential.layout)
    mixture, how, searched, hessians_at = modes_of(counted, previous, n, seed, local_minima, bounds)
    if mixture is None:
        raise ValueError("no hyperparameters with a finite posterior density")
    theta, report, rng = importance_resampled(counted, mixture, draws, seed, n)
    report.update(seconds=time.perf_counter() - started, start=how, warm_start=how)
    labels = (searched, hessians_at, n)
    report["adaptation"] = mixture_adaptation(theta, mixture, labels, seed, chains, rng)
    return theta, report
