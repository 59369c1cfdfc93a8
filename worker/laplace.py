"""Large campaigns' hyperparameters from a Laplace mixture, corrected and checked by
Pareto-smoothed importance sampling: :func:`laplace_posterior`.

Past a few hundred labels the hyperparameters' posterior concentrates, and NUTS spends a
thousand gradient evaluations (each an ``n x n`` Cholesky and inverse) to draw what a
distribution at each local mode describes. Here the modes are found by L-BFGS (warm: from the
previous model's modes, or its chains' last draws; cold: from the starts of
:func:`worker.cold_start.local_minima`'s search, on a campaign's first mixture and again each
time its labels have doubled since the last search, beside the warm starts), and each is
weighed by its Laplace mass.
The proposal ``q`` is a mixture of Student-t distributions (5 degrees of freedom) with each
mode's inverse Hessian as scale matrix: heavier-tailed than the Gaussians, so that it covers
the posterior's tails (at Hartmann 6-D, n = 400, Gaussians gave a Pareto ``k`` of 0.48 to 0.76
over four sets of 150 draws, Student-t 0.19 to 0.37).

The posterior's density ``p`` (``U`` alone: one Cholesky per draw) at ``q``'s draws gives their
importance ratios ``p / q``; smoothed by their Pareto tail (Vehtari, Simpson, Gelman, Yao and
Gabry, "Pareto smoothed importance sampling", JMLR 2024), they weigh the draws, and the draws
handed on are resampled by those weights. The tail's shape ``k`` (fitted by
:func:`pyro.ops.stats.fit_generalized_pareto`, as :func:`pyro.infer.importance.psis_diagnostic`
fits it) says whether ``q`` covers ``p``: at most ``min(1 - 1 / log10 S, 0.7)`` for ``S``
draws (:func:`khat_limit`) is where importance sampling is reliable. A mixture above it tries
once more with every component ``WIDEN`` times as wide, fresh draws judged by their own ``k``:
where the posterior's tails are heavier than the Hessian says, as at a few hundred labels (at
Hartmann 6-D, a label's refit at 201 labels: ``k`` 0.73 and 0.63 on two data sets of five,
-0.14 and 0.11 widened, at an importance ESS of 91 and 108 of 300 draws, in 0.7 s where NUTS
took 7). It is not the first try because it costs ESS where the Hessian is right (at 1,001
labels, 41 of 100 against 82). A mixture still above it is not used: the refit samples by
NUTS instead, its chains started from the mixture's draws
(:func:`worker.fitting.posteriors.posterior`). A mode that no start led to cannot show in
``k``, which is why the mixture is used only past a campaign's ``laplace_from`` labels.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch
from pyro.ops.stats import fit_generalized_pareto
from scipy.special import logsumexp
from scipy.stats import genpareto, multivariate_normal, multivariate_t

from fbgp_al.worker.cold_start import (
    descend,
    gaussian_of,
    laplace_mixture,
    local_minima,
    mode_gaussian,
    near,
    newton,
    search_bounds,
)
from fbgp_al.worker.mcmc import Posterior
from fbgp_al.worker.potential import GPPotential
from fbgp_al.worker.vocabulary.defaults import MCMC_DEFAULTS

PROPOSAL_DF = 5.0  # the proposal's components: Student-t with these degrees of freedom
PROPOSAL_WORK = 300 * 600**3  # 300 densities at n = 600 (see proposal_count)
PROPOSALS_LEAST = 150  # fewer draws make k too noisy to judge by (and its limit stricter)
# From FEW_FROM labels, where the densities are an n^3 Cholesky each, PROPOSALS_FEW are weighed
# and resampled to the draws kept: at Hartmann 6-D, 1,001 and 2,001 labels (8 and 3 sets of
# draws), the first 100 of 150 had k of at most 0.35 against their limit of 0.5
# (docs/benchmarks.md, issue 53).
FEW_FROM = 1000
PROPOSALS_FEW = 100
WIDEN = 1.5  # a mixture above its limit tries once more, its components this much wider
WARM_ITERATIONS = 40  # L-BFGS iterations from each warm start
WARM_STEP_SIZE = 0.5  # a NUTS chain's first step size when it starts from the mixture
SEARCH_AGAIN = 2  # a cold search for modes again once the labels have doubled since the last
# A warm refit keeps its previous mixture's Hessians (each scaled by the labels' growth) until
# the labels have grown HESSIAN_KEPT times since they were computed, and finds each mode from the
# previous one by Newton steps with it (worker.cold_start.newton): a few gradients in place of
# L-BFGS's dozen and the Hessian's 2 x (d + 1) (docs/benchmarks.md, issue 53).
HESSIAN_KEPT = 1.05


class Counted:
    """A potential that counts the rows it evaluates (gradients) and values alone."""

    def __init__(self, potential: GPPotential):
        self.potential, self.gradients, self.values_only = potential, 0, 0

    def __call__(self, theta):
        self.gradients += len(theta)
        return self.potential(theta)

    def values(self, theta):
        self.values_only += len(theta)
        return self.potential.values(theta)

    def __getattr__(self, name):
        return getattr(self.potential, name)


def _components(modes, scales, df: float | None):
    """The mixture's components: Gaussians (``df`` None) or Student-t with ``df`` degrees of
    freedom, centred on ``modes`` with scale matrices ``L L^T``."""
    if df is None:
        return [multivariate_normal(m, s @ s.T) for m, s in zip(modes, scales, strict=True)]
    return [multivariate_t(m, s @ s.T, df=df) for m, s in zip(modes, scales, strict=True)]


def mixture_log_density(
    theta: np.ndarray, modes, weights, scales, df: float | None = None
) -> np.ndarray:
    """``log q(theta)`` (``B``) of the mixture with ``weights`` of components centred on
    ``modes`` with scale matrices ``L_k L_k^T`` (``scales[k] = L_k``): Gaussians, or Student-t
    with ``df`` degrees of freedom."""
    theta = np.atleast_2d(theta)
    components = _components(modes, scales, df)
    parts = [
        math.log(w) + np.atleast_1d(c.logpdf(theta))
        for w, c in zip(weights, components, strict=True)
        if w > 0
    ]
    return logsumexp(np.array(parts), axis=0)


def mixture_draws(
    count: int, modes, weights, scales, df: float | None, rng: np.random.Generator
) -> np.ndarray:
    """``count`` draws (``count x P``) of that mixture, from ``rng``."""
    k = rng.choice(len(modes), count, p=weights)
    steps = np.einsum("bij,bj->bi", scales[k], rng.standard_normal((count, modes.shape[1])))
    if df is not None:  # a Gaussian over the root of a chi-square's share: Student-t
        steps /= np.sqrt(rng.chisquare(df, count) / df)[:, None]
    return modes[k] + steps


def psis(log_ratios: np.ndarray) -> tuple[np.ndarray, float]:
    """Pareto-smoothed importance weights (normalized, ``S``) of ``log_ratios``, and the Pareto
    shape ``k`` of their tail: the largest ``M = min(S / 5, 3 sqrt(S))`` ratios, above the
    next one, fitted by a generalized Pareto distribution (as
    :func:`pyro.infer.importance.psis_diagnostic` fits them), replaced by its quantiles at
    ``(i - 1/2) / M`` and capped at the largest ratio (Vehtari et al., Section 3). ``k`` is
    ``inf`` (the weights the raw ones, a ratio that is not finite weighing 0) where a ratio is
    not finite or the tail has fewer than 10."""
    s = len(log_ratios)
    finite = np.isfinite(log_ratios)
    lw = np.where(finite, log_ratios - np.max(log_ratios, where=finite, initial=-np.inf), -np.inf)
    w = np.exp(lw)
    if not finite.all():
        return w / w.sum(), math.inf
    order = np.argsort(lw, kind="stable")
    cutoff = max(math.log(1e-15), lw[order[-math.ceil(min(0.2 * s, 3.0 * math.sqrt(s))) - 1]])
    tail = order[lw[order] > cutoff]  # ascending
    if len(tail) < 10:
        return w / w.sum(), math.inf
    k, sigma = (
        float(v) for v in fit_generalized_pareto(torch.from_numpy(w[tail] - math.exp(cutoff)))
    )
    if math.isfinite(k) and sigma > 0:
        q = (np.arange(1, len(tail) + 1) - 0.5) / len(tail)
        w[tail] = np.minimum(math.exp(cutoff) + genpareto(c=k, scale=sigma).ppf(q), 1.0)
    return w / w.sum(), k


def proposal_count(draws: int, n: int) -> int:
    """How many draws of the mixture are weighed, for ``draws`` kept at ``n`` labels: twice
    ``draws`` (of at least ``PROPOSALS_LEAST``) while a density costs little (``n^3`` of at most
    ``PROPOSAL_WORK / (2 draws)``), fewer beyond, down to that many. At Hartmann 6-D, n = 200,
    150 draws passed the Pareto ``k`` check 5 times in 8 and 300 draws 8 in 8; at n = 600, 150
    draws had ``k`` 0.16 to 0.34 against a limit of 0.54. From ``FEW_FROM`` labels,
    ``PROPOSALS_FEW`` (fewer than the draws kept, which are resampled from them)."""
    if n >= FEW_FROM:
        return PROPOSALS_FEW
    base = max(draws, PROPOSALS_LEAST)
    return int(min(2 * base, max(base, PROPOSAL_WORK / n**3)))


def khat_limit(draws: int) -> float:
    """The largest Pareto ``k`` at which ``draws`` importance draws are reliable:
    ``min(1 - 1 / log10 S, 0.7)`` (Vehtari et al.)."""
    return min(1.0 - 1.0 / math.log10(draws), 0.7)


def kept_hessians(previous: dict | None, n: int) -> list[np.ndarray] | None:
    """The ``previous`` mixture's Hessians, one per mode, scaled to ``n`` labels (``H n / m``
    for a mixture of ``m``), where they were computed at most ``HESSIAN_KEPT`` times fewer
    labels ago; None otherwise (a NUTS posterior's, or an adaptation made before them)."""
    if not previous or not previous.get("scales") or not previous.get("hessians_at"):
        return None
    if n > HESSIAN_KEPT * int(previous["hessians_at"]):
        return None
    scales, at = np.asarray(previous["scales"], dtype=np.float64), int(previous["scales_at"])
    return [np.linalg.inv(scale @ scale.T) * (n / at) for scale in scales]


def warm_minima(potential, previous: dict | None, bounds=None, n: int | None = None):
    """The minima from the ``previous`` posterior's ``adaptation``: from its modes (a mixture's)
    or its chains' last draws (NUTS's), best first, skipping a start already within 3 sds of a
    mode found, within ``bounds`` (by default the GP's :func:`worker.cold_start.search_bounds`).
    From a mode whose Hessian is kept at ``n`` labels (:func:`kept_hessians`), Newton steps with
    it (:func:`worker.cold_start.newton`), the Gaussian that Hessian's; else L-BFGS and the
    Gaussian of the Hessian there (:func:`worker.cold_start.mode_gaussian`). Returns the minima
    ``[(U, theta)]``, their Gaussians (none when it has neither or no start is finite) and how
    many of them kept their Hessian."""
    if not previous:
        return [], [], 0
    modes = previous.get("modes")
    starts = np.asarray(modes or previous.get("last") or [], dtype=np.float64)
    if starts.ndim != 2 or starts.shape[1] != potential.dim or not len(starts):
        return [], [], 0
    kept = kept_hessians(previous, n) if modes and n is not None else None
    if kept is not None and len(kept) != len(starts):
        kept = None
    values = potential.values(starts)
    bounds = search_bounds(potential) if bounds is None else bounds
    found, gaussians, reused = [], [], 0
    for i in np.argsort(values, kind="stable"):
        if not np.isfinite(values[i]):
            break
        if any(near(starts[i], x, g[0]) for (_, x), g in zip(found, gaussians, strict=True)):
            continue
        minimum = None if kept is None else newton(potential, starts[i], kept[i], bounds)
        if minimum is not None:
            found.append(minimum)
            gaussians.append(gaussian_of(kept[i]))
            reused += 1
            continue
        value, x = descend(potential, starts[i], bounds, WARM_ITERATIONS)
        found.append((value, x))
        gaussians.append(mode_gaussian(potential, x))
    return found, gaussians, reused


def searched_at(previous: dict | None, n: int) -> int | None:
    """The number of labels at the last cold search for modes, as ``previous`` (an
    ``adaptation``) records it (a mixture's, and that of NUTS chains started from a mixture
    that failed its check); for NUTS chains of a campaign below ``laplace_from`` labels, which
    started at a cold search's modes and moved between modes themselves, ``n``: the switch to
    the mixture counts as a search. None without a previous posterior."""
    if not previous:
        return None
    return previous.get("searched_at") or n


def search_due(previous: dict | None, n: int) -> bool:
    """Whether a refit on ``n`` labels searches cold for modes beside its warm starts: without a
    previous posterior, and whenever ``n`` has reached :data:`SEARCH_AGAIN` times the labels of
    the last search (a mode that new labels open far from the old ones is searched for within
    a doubling; the searches' cost stays a bounded share of the refits')."""
    last = searched_at(previous, n)
    return last is None or n >= SEARCH_AGAIN * last


def modes_of(potential, previous: dict | None, n: int, seed: int, cold_search=None, bounds=None):
    """The mixture at the posterior's modes (:func:`worker.cold_start.laplace_mixture`): the
    modes L-BFGS reaches from ``previous``'s (:func:`warm_minima`, within ``bounds``), and
    those of a cold search beside them when it is due (:func:`search_due`) or no warm start was
    finite. ``cold_search(potential, seed)`` gives a cold search's minima (by default the GP's,
    :func:`worker.cold_start.local_minima`). Returns the mixture (None: nothing finite), how it
    was found (``warm``, ``cold`` or ``warm+cold``), the labels of the last cold search and
    those at which the oldest of its Hessians was computed (:func:`kept_hessians`)."""
    found, gaussians, reused = warm_minima(potential, previous, bounds, n)
    how, searched = "warm", searched_at(previous, n)
    hessians_at = int(previous["hessians_at"]) if reused else n
    if not found or search_due(previous, n):
        cold = (cold_search or local_minima)(potential, seed) or []
        found, gaussians = found + cold, gaussians + [None] * len(cold)
        how, searched = ("warm+cold" if len(found) > len(cold) else "cold"), n
    if not found:
        return None, how, searched, hessians_at
    order = np.argsort([value for value, _ in found], kind="stable")  # best first
    mixture = laplace_mixture(potential, [found[i] for i in order], [gaussians[i] for i in order])
    return mixture, how, searched, hessians_at


def resample(weights: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` indices drawn by systematic resampling from normalized ``weights`` (sorted)."""
    edges = np.cumsum(weights)
    edges[-1] = 1.0
    return np.searchsorted(edges, (rng.random() + np.arange(count)) / count, side="right")


def importance_resampled(
    potential: Counted,
    mixture,
    draws: int,
    seed: int,
    n: int,
    df: float | None = PROPOSAL_DF,
    proposals: int | None = None,
    widen: float | None = WIDEN,
):
    """``draws`` draws of the ``mixture`` (:func:`modes_of`'s) resampled by their
    Pareto-smoothed importance weights against ``potential`` (counted) on ``n`` labels, widened
    once where ``k`` is above its limit (see the module): the draws, the diagnostics of a
    mixture's draws (``method`` "laplace", ``khat`` and its limit, ``widened``,
    ``importance_ess``, the modes and their weights, the distinct draws, the evaluations; no
    R-hat, ESS or divergences), and the generator that drew them (for what the caller draws
    after)."""
    modes, weights, scales = mixture
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(7,)))
    count = max(draws, proposals) if proposals else proposal_count(draws, n)

    def weighed(scales):
        proposed = mixture_draws(count, modes, weights, scales, df, rng)
        density = mixture_log_density(proposed, modes, weights, scales, df)
        return (proposed, *psis(-potential.values(proposed) - density))

    proposed, w, khat = weighed(scales)
    widened = 1.0
    if khat > khat_limit(count) and widen is not None:
        proposed, w, khat = weighed(scales * widen)
        widened = widen
    theta = proposed[resample(w, draws, rng)]
    diagnostics = {
        "method": "laplace",
        "khat": khat,
        "khat_limit": khat_limit(len(proposed)),
        "widened": widened,
        "importance_ess": float(1.0 / (w * w).sum()),
        "modes": len(modes),
        "mode_weights": weights.tolist(),
        "distinct_draws": len(np.unique(theta, axis=0)),
        "max_rhat": None,
        "min_ess_bulk": None,
        "divergences": 0,
        "gradient_evaluations": potential.gradients,
        "value_evaluations": potential.values_only,
        "chains": 1,
        "samples_per_chain": draws,
    }
    return theta, diagnostics, rng


def laplace_posterior(
    u,
    z,
    draws: int = MCMC_DEFAULTS["draws"],
    seed: int = 0,
    *,
    previous: dict | None = None,
    chains: int = MCMC_DEFAULTS["chains"],
    label_noise=None,
    prior_mean=None,
    noise_floor: float = MCMC_DEFAULTS["noise_floor"],
    df: float | None = PROPOSAL_DF,
    proposals: int | None = None,
    widen: float | None = WIDEN,
) -> Posterior:
    """``draws`` draws of ``(l_1..l_d, s2)``: ``draws`` from the mixture at the posterior's modes
    (:func:`modes_of`: warm from ``previous``, a posterior's ``adaptation``, where it has modes
    or draws, with a cold search beside them when one is due; else cold), resampled by their
    Pareto-smoothed importance weights (see the module), and the model's mode at the heaviest
    mode. Deterministic for a given seed. ``df``: the components' degrees of freedom (None:
    Gaussians). ``widen``: a mixture above its limit tries once more with its components this
    many times as wide (None: never).

    Its diagnostics: ``method`` "laplace"; ``khat`` and ``khat_limit`` (the mixture is fit to
    use when ``khat <= khat_limit``) and ``widened`` (the factor of the mixture used: 1, or
    ``widen`` when the first failed); ``importance_ess``, the draws' effective number under
    their smoothed weights (``1 / sum w^2``); ``modes`` and their ``mode_weights``;
    ``distinct_draws`` after resampling; the gradient and value evaluations, seconds and
    ``warm_start``; no R-hat or bulk ESS (None) and no divergences: no chain sampled them. Its
    ``adaptation`` holds the modes and ``searched_at`` (the labels at the last cold search), for
    the next refit, and a NUTS warm start for ``chains`` chains (each at a draw, the draws'
    variances as inverse mass), for a refit that does not use the mixture. ``label_noise``,
    ``prior_mean``, ``noise_floor``: as :func:`worker.mcmc.sample_posterior`'s."""
    started = time.perf_counter()
    u = np.asarray(u, dtype=np.float64)
    noise = None if label_noise is None else np.asarray(label_noise, dtype=np.float64)
    potential = Counted(
        GPPotential(u, np.asarray(z, dtype=np.float64).reshape(-1), noise, prior_mean, noise_floor)
    )
    mixture, how, searched, hessians_at = modes_of(potential, previous, len(u), seed)
    if mixture is None:
        raise ValueError("no hyperparameters with a finite posterior density")
    theta, diagnostics, rng = importance_resampled(
        potential, mixture, draws, seed, len(u), df, proposals, widen
    )
    modes, weights, _ = mixture
    d = u.shape[1]
    best = modes[int(np.argmax(weights))]
    diagnostics.update(
        seconds=time.perf_counter() - started, warm_start=how, noise_floor=noise_floor
    )
    return Posterior(
        lengthscale=torch.from_numpy(np.exp(theta[:, :d])),
        noise=torch.from_numpy(noise_floor + np.exp(theta[:, d])),
        chains=1,
        mode_lengthscale=torch.from_numpy(np.exp(best[:d])),
        mode_noise=float(noise_floor + np.exp(best[d])),
        diagnostics=diagnostics,
        adaptation=mixture_adaptation(
            theta, mixture, (searched, hessians_at, len(u)), seed, chains, rng
        ),
    )


def mixture_adaptation(theta, mixture, labels: tuple, seed: int, chains: int, rng) -> dict:
    """A mixture's ``adaptation`` for the next refit: its modes and their scales (``L`` with
    ``L L^T`` the inverse Hessian), ``labels`` (those of the last cold search, those at which
    the oldest Hessian was computed, and those now: ``searched_at``, ``hessians_at`` and
    ``scales_at``), and a NUTS warm start for ``chains`` chains, each at one of the draws
    ``theta`` (``rng``'s choice), the draws' variances as inverse mass, for a refit that does
    not use the mixture."""
    modes, _, scales = mixture
    searched, hessians_at, n = labels
    spread = np.maximum(theta.var(0), 1e-6)
    return {
        "source": "laplace",
        "modes": modes.tolist(),
        "scales": scales.tolist(),
        "scales_at": n,
        "hessians_at": hessians_at,
        "searched_at": searched,
        "seed": seed,
        "last": theta[rng.choice(len(theta), chains)].tolist(),
        "step_size": [WARM_STEP_SIZE] * chains,
        "inverse_mass": [spread.tolist()] * chains,
    }
