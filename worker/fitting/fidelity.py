"""A refit of a campaign with fidelities (:mod:`worker.vocabulary.fidelities`) as pure math: the
labels in the model's units (the declared inputs' features, each label's level, the labels of all
levels standardized together), NUTS on the autoregressive multi-fidelity GP
(:func:`worker.fidelity.model.sample`, warm-started from the previous model's adaptation as a
single-fidelity refit is), the candidates (a refit's pool subsample of points at levels, weighed
by the failure model, :func:`worker.fitting.ranking.candidates_of`) scored by the campaign's
acquisition (:func:`worker.fidelity.acquisition.scores`) with the runs out as fantasies, a
parallel campaign's batch chosen greedily (each pick a fantasy for the next), the top level's
accuracy estimates (:func:`accuracy`), and the model body that holds it all.

The model body: ``fidelity`` (the levels, their costs, the labels per level and their cost, each
``rho``'s posterior summary, the hyperparameters' names and the kept draws ``theta`` that
predictions mix), ``adaptation`` (the next refit's warm start), ``transform`` (the declared
inputs' box and the labels' standardization), ``diagnostics`` (R-hat, ESS and divergences per
hyperparameter, as a single-fidelity refit reports them) and ``accuracy``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from fbgp_al.worker.fidelity import acquisition
from fbgp_al.worker.fidelity.mixture import mixture_sample
from fbgp_al.worker.fidelity.model import WARM_WARMUP, Conditioned, Layout, Potential
from fbgp_al.worker.fidelity.model import sample as sample_levels
from fbgp_al.worker.fitting.posteriors import (
    LAPLACE_TRIED,
    noise_floor,
    scoring_draws,
    uses_laplace,
    warm_start_of,
)
from fbgp_al.worker.fitting.ranking import candidates_of, ranking_of
from fbgp_al.worker.transforms import OutputStandardization
from fbgp_al.worker.vocabulary import fidelities
from fbgp_al.worker.vocabulary.defaults import MAX_BATCH, RANKING_SIZE
from fbgp_al.worker.vocabulary.space import Space

SCORING_DRAWS = 30  # draws the acquisition and the accuracy estimates use, evenly spaced
# candidate runs scored per refit at most (a pool subsample, as a refit's): each costs the
# top level's variance over the reference points under every scoring draw
CANDIDATES = 2000
REFERENCE_POINTS = 256  # pool points the top level's integrated variance averages over
NORMAL_95 = 0.975


@dataclass(frozen=True)
class LevelData:
    """A campaign's labels in the model's units: features ``u`` of the declared inputs, levels
    ``t`` (0 the lowest), standardized labels ``z`` (``scale_y``), the refit's seed, and the
    levels' costs."""

    u: np.ndarray
    t: np.ndarray
    z: np.ndarray
    scale_y: OutputStandardization
    seed: int
    costs: list[float]

    @property
    def n(self) -> int:
        return len(self.z)

    @property
    def levels(self) -> int:
        return len(self.costs)


def split_features(features: np.ndarray, levels: int) -> tuple[np.ndarray, np.ndarray]:
    """The features of points as stored (the level a choice input, last) -> the declared
    inputs' features and each point's level."""
    features = np.asarray(features, dtype=np.float64)
    return features[:, :-levels], np.argmax(features[:, -levels:], axis=1).astype(np.int64)


def prepare(spec: dict, labels: list[dict]) -> LevelData:
    """The labels in the model's units; the seed as a single-fidelity refit's."""
    features = Space.of(spec["inputs"]).to_gp([label["x"] for label in labels])
    costs = fidelities.costs(spec)
    u, t = split_features(features, len(costs))
    y = np.array([label["y"] for label in labels], dtype=np.float64)
    scale_y = OutputStandardization.from_labels(y)
    seed = (int(spec["seed"]) * 1_000_003 + len(labels)) % 2**32
    return LevelData(u, t, scale_y.to_z(y).numpy(), scale_y, seed, costs)


@dataclass(frozen=True)
class LevelFit:
    """A refit's posterior: its labels (``data``), the draws of the hyperparameters
    (``theta``: NUTS's, chain-major, or a Laplace mixture's, all kept), the sampler's report
    (``method`` "laplace" for a mixture's) and the noise floor it sampled with."""

    data: LevelData
    theta: np.ndarray
    report: dict
    floor: float
    seconds: float

    @property
    def potential(self) -> Potential:
        d = self.data
        return Potential(d.u, d.t, d.z, d.levels, self.floor)


def sample(spec: dict, labels: list[dict], previous: dict | None = None) -> LevelFit:
    """The hyperparameters' draws on ``labels`` (:func:`sampled` with the campaign's ``mcmc``,
    warm-started from the ``previous`` model's adaptation when the campaign's ``mcmc`` asks so)."""
    started = time.perf_counter()
    data, floor = prepare(spec, labels), noise_floor(spec)
    potential = Potential(data.u, data.t, data.z, data.levels, floor)
    theta, report = sampled(
        potential,
        spec["mcmc"],
        data.seed,
        warm_start_of(spec, previous),
        uses_laplace(spec, data.n),
    )
    return LevelFit(data, theta, report, floor, time.perf_counter() - started)


def sampled(
    potential: Potential, mcmc: dict, seed: int, warm: dict | None, laplace: bool
) -> tuple[np.ndarray, dict]:
    """The draws of ``potential`` and their report: with ``laplace``, the Laplace mixture's
    ``mcmc.draws`` (:func:`worker.fidelity.mixture.mixture_sample`) where their Pareto ``k`` is
    within its limit; else NUTS with ``mcmc``'s chains, warm-up and samples, from ``warm`` (an
    earlier refit's adaptation) or from the mixture's draws where it was tried (the report's
    ``laplace`` then says how it fared)."""
    tried = None
    if laplace:
        theta, report = mixture_sample(
            potential, scoring_draws(mcmc), seed, warm, int(mcmc["chains"])
        )
        if report["khat"] <= report["khat_limit"]:
            return theta, report
        tried = {key: report[key] for key in LAPLACE_TRIED}
        warm = report["adaptation"]  # its draws and spread start the chains
    theta, report = sample_levels(
        potential,
        int(mcmc["chains"]),
        int(mcmc["warmup"]),
        int(mcmc["samples"]),
        seed,
        warm,
        int(mcmc.get("warm_warmup", WARM_WARMUP)),
    )
    report["method"] = "nuts"
    if tried is not None:
        report["laplace"] = tried
        report["adaptation"]["searched_at"] = warm["searched_at"]
    return theta, report


def kept(fit: LevelFit, spec: dict) -> np.ndarray:
    """The draws that predictions mix (:func:`kept_draws` with the campaign's ``mcmc``)."""
    return kept_draws(fit.theta, fit.report, spec["mcmc"])


def kept_draws(theta: np.ndarray, report: dict, mcmc: dict) -> np.ndarray:
    """Of :func:`sampled`'s draws, those predictions mix: every ``thinning``-th of NUTS's, all
    of a mixture's."""
    if report.get("method") == "laplace":
        return theta
    return theta[:: max(1, int(mcmc["thinning"]))]


def spaced(rows: np.ndarray, count: int) -> np.ndarray:
    """At most ``count`` of ``rows``, evenly spaced."""
    index = np.unique(np.linspace(0, len(rows) - 1, min(count, len(rows))).round().astype(int))
    return rows[index]


def conditioned(potential: Potential, theta: np.ndarray) -> list[Conditioned]:
    """The model at each draw of ``theta``, conditioned on the runs; a draw whose covariance
    no jitter factorizes is left out."""
    out = []
    for row in theta:
        try:
            out.append(Conditioned.of(potential, row))
        except ValueError:
            continue
    if not out:
        raise ValueError("no draw's covariance of the runs could be factorized")
    return out


def reference_points(spec: dict, pool, levels: int) -> np.ndarray:
    """The declared inputs' features of at most :data:`REFERENCE_POINTS` pool points, drawn
    from the campaign's seed alone (the same for every refit): where the top level's
    integrated variance is taken."""
    rng = np.random.default_rng([int(spec["seed"]), 2**32 + 1])
    index = pool.subsample(min(pool.size, REFERENCE_POINTS * levels), rng)
    space = Space.of(spec["inputs"])
    u, _ = split_features(space.features(pool.points(index)), levels)
    return np.unique(u, axis=0)[:REFERENCE_POINTS]


def batch(draws, u, t, reference, costs, name: str, size: int, weights=None):
    """The candidates' rows in the order to hand them out and their scores: a greedy batch of
    ``size`` > 1 (each pick's run a fantasy when the next is scored), as a parallel campaign's
    ranking holds (a later model chooses the next batch); one pick (a sequential campaign's)
    followed by the others by their scores, ``RANKING_SIZE`` in all; each score times the
    candidate's probability of success (``weights``); candidates that score ``-inf`` (a
    disagreement's other levels) left out."""

    def scored(g):
        s = acquisition.scores(g, u, t, reference, costs, name)
        return s if weights is None else np.where(np.isfinite(s), s * weights, s)

    first = scored(draws)
    order, values = [], []
    current = first
    for _ in range(size):
        if order:
            current = scored(draws)
            current[order] = -np.inf
        pick = int(np.argmax(current))
        if not np.isfinite(current[pick]):
            break
        order.append(pick)
        values.append(float(current[pick]))
        draws = acquisition.fantasized(draws, u[pick : pick + 1], t[pick : pick + 1])
    if size > 1:  # a parallel campaign's ranking: its batch alone, as a single-fidelity one's
        return np.array(order, dtype=np.int64), np.array(values)
    rest = np.argsort(-first, kind="stable")
    rest = [int(r) for r in rest if np.isfinite(first[r]) and r not in set(order)]
    rows = (order + rest)[: max(RANKING_SIZE, len(order))]
    scores = values + [float(first[r]) for r in rows[len(order) :]]
    return np.array(rows, dtype=np.int64), np.array(scores)


def accuracy(draws: list[Conditioned], data: LevelData, reference: np.ndarray) -> dict:
    """The top level's accuracy estimates, as a single-fidelity model's
    (:mod:`worker.accuracy`) over the draws' mixture: leave-one-out of the top level's labels
    (its RMSE, NLPD in the GP's units, 95% coverage), and over the ``reference`` points the
    integrated predictive variance of y (``ipv``) and of f (``ipv_f``) and the draws'
    disagreement (``qbc``); ``..._relative`` against the top level's labels' standard deviation
    (variance), all labels' where it has fewer than two."""
    top = data.levels - 1
    std = data.scale_y.std
    z = torch.as_tensor(data.z)
    rows = np.flatnonzero(data.t == top)
    mus, loo_vars, means, latents, noises = [], [], [], [], []
    for g in draws:
        inverse = torch.cholesky_inverse(g.L)
        diag = torch.diagonal(inverse)[rows]
        mus.append((z[rows] - (inverse @ z)[rows] / diag).numpy())
        loo_vars.append((1.0 / diag).numpy())
        mean, var = g.predict(reference, top)
        means.append(mean.numpy())
        latents.append(var.numpy())
        noises.append(float(g.noise[top]))
    mus, loo_vars = np.array(mus), np.array(loo_vars)
    means, latents = np.array(means), np.array(latents)
    spread = means.var(axis=0)
    ipv_f = float((latents.mean(0) + spread).mean())
    ipv = float((latents.mean(0) + np.mean(noises) + spread).mean())
    qbc = float(spread.mean())
    zs = z.numpy()[rows]
    density = np.exp(-0.5 * (zs - mus) ** 2 / loo_vars) / np.sqrt(2 * math.pi * loo_vars)
    cdf = 0.5 * (1 + _erf((zs - mus) / np.sqrt(2 * loo_vars)))
    mixed = cdf.mean(0)
    top_y = data.scale_y.mean_from_z(torch.as_tensor(zs)).numpy()
    scale = float(np.std(top_y, ddof=1)) / std if len(rows) > 1 and np.std(top_y) > 0 else 1.0
    loo_rmse = float(np.sqrt(np.mean((mus.mean(0) - zs) ** 2))) if len(rows) else math.nan
    out = {
        "loo_rmse": loo_rmse * std,
        "loo_rmse_relative": loo_rmse / scale,
        "loo_nlpd": float(-np.mean(np.log(density.mean(0)))) if len(rows) else math.nan,
        "loo_coverage_95": float(np.mean((mixed >= 1 - NORMAL_95) & (mixed <= NORMAL_95))),
        "ipv": ipv * std**2,
        "ipv_relative": ipv / scale**2,
        "ipv_f": ipv_f * std**2,
        "ipv_f_relative": ipv_f / scale**2,
        "qbc": qbc * std**2,
        "qbc_relative": qbc / scale**2,
        "points": len(reference),
        "draws": len(draws),
        "level": top,
    }
    return {
        k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in out.items()
    }


def _erf(a: np.ndarray) -> np.ndarray:
    return torch.special.erf(torch.as_tensor(a)).numpy()


def summary(spec: dict, labels: list[dict], fit: LevelFit, theta: np.ndarray) -> dict:
    """The model body's ``fidelity``: the levels, their costs, the labels per level and their
    cost, each ``rho``'s posterior mean, sd and 5%, 50%, 95% quantiles, the hyperparameters'
    names and the kept draws ``theta``."""
    layout = Layout(fit.data.levels, fit.data.u.shape[1])
    names = layout.names()
    rhos = []
    for j in range(fit.data.levels - 1):
        values = theta[:, names.index(f"rho_{j}")]
        q05, q50, q95 = np.quantile(values, [0.05, 0.5, 0.95])
        rhos.append(
            {
                "mean": float(values.mean()),
                "sd": float(values.std()),
                "q05": float(q05),
                "median": float(q50),
                "q95": float(q95),
            }
        )
    return {
        "levels": fidelities.levels(spec),
        "costs": fit.data.costs,
        "labels_per_level": fidelities.counts(spec, labels),
        "cost_spent": fidelities.spent(spec, labels),
        "rho": rhos,
        "names": names,
        "noise_floor": fit.floor,
        "theta": theta.tolist(),
        "mode": int(np.argmin(fit.potential.values(theta))),
    }


def ranked(
    spec: dict,
    pool,
    labels: list[dict],
    fit: LevelFit,
    exclude: set[int],
    pending: list[int],
    started: float,
    failure=None,
):
    """The model (the ``/model`` body) and ranking (``[{index, x, score}]``) of a refit with
    fidelities, as :func:`worker.fitting.ranking.ranked` gives a single-fidelity one's; its
    scoring is done here (a generator that yields no step, for the same driver)."""
    if False:  # no scoring step: the candidates are scored here
        yield
    data = fit.data
    space = Space.of(spec["inputs"])
    theta = kept(fit, spec)
    draws = conditioned(fit.potential, spaced(theta, SCORING_DRAWS))
    reference = reference_points(spec, pool, data.levels)
    estimates = accuracy(draws, data, reference)
    subsample = dict(spec, pool_subsample=min(int(spec["pool_subsample"]), CANDIDATES))
    candidates, features, pending_f, weights = candidates_of(
        subsample, pool, space, data.n, exclude, pending, failure
    )
    ranking = []
    if len(candidates):
        u, t = split_features(features.numpy(), data.levels)
        if pending_f is not None:  # runs out: fantasies
            draws = acquisition.fantasized(draws, *split_features(pending_f.numpy(), data.levels))
        size = min(int(spec["max_pending"]), MAX_BATCH) if spec.get("mode") == "parallel" else 1
        w = None if weights is None else weights.numpy()
        rows, scores = batch(draws, u, t, reference, data.costs, spec["acquisition"], size, w)
        if len(rows):
            ranking = ranking_of(space, pool, candidates, rows, scores)
    report = {k: v for k, v in fit.report.items() if k not in ("adaptation", "start")}
    declared = Space.of(fidelities.declared_inputs(spec))
    diagnostics = dict(
        report,
        warm_start=fit.report["start"],
        sampling_seconds=fit.seconds,
        refit_seconds=time.perf_counter() - started,
        seed=data.seed,
    )
    model = {
        "version": data.n,
        "n_labeled": data.n,
        "fidelity": summary(spec, labels, fit, theta),
        "adaptation": fit.report["adaptation"],
        "transform": {**declared.transform(), **data.scale_y.to_dict()},
        "diagnostics": diagnostics,
        "accuracy": estimates,
    }
    if declared.typed:
        model["features"] = declared.feature_names
    if failure is not None:
        model["failures"] = failure.to_dict()
    return model, ranking


def model_draws(spec: dict, model: dict, labels: list[dict]):
    """A stored model's draws, conditioned on the labels it saw, those labels in the model's
    units, and the mode draw (its answers' stand-in for a mode GP): ``(draws, data, mode)``."""
    seen = labels[: model["n_labeled"]]
    data = prepare(spec, seen)
    body = model["fidelity"]
    potential = Potential(data.u, data.t, data.z, data.levels, float(body["noise_floor"]))
    theta = np.asarray(body["theta"], dtype=np.float64)
    mode = Conditioned.of(potential, theta[int(body["mode"])])
    return conditioned(potential, theta), data, mode
