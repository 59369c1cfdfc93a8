"""A refit's ranking: the candidates (a fresh pool subsample, less the points labeled or out),
scored by the acquisition (weighed by the failure model's pessimistic chance of success), the
greedy batch of a parallel campaign, and the model body that holds it all."""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import torch

from fbgp_al.worker import accuracy
from fbgp_al.worker.acquisition import SHORTLIST, greedy_batch_outputs, scorer
from fbgp_al.worker.fantasies import Fantasized, greedy_picks
from fbgp_al.worker.feasibility.campaign import FailureModel
from fbgp_al.worker.fitting import search
from fbgp_al.worker.fitting.posteriors import Data
from fbgp_al.worker.mcmc import Posterior
from fbgp_al.worker.scoring import Output, Scoring
from fbgp_al.worker.vocabulary import box
from fbgp_al.worker.vocabulary.constraints import of_spec
from fbgp_al.worker.vocabulary.defaults import (
    MAX_BATCH,
    RANKING_SIZE,
)
from fbgp_al.worker.vocabulary.design import GridPool, PointPool
from fbgp_al.worker.vocabulary.space import Space


def candidates_of(
    spec: dict,
    pool,
    space,
    n: int,
    exclude: set[int],
    pending: list[int],
    failure: FailureModel | None = None,
    pending_x=(),
):
    """The pool points a refit on ``n`` labels scores (a seeded subsample, none of them in
    ``exclude`` or ``pending``; with a ``failure`` model, none below its ``min_success``, and
    its ``excluded`` and ``bracketed`` counts set), the GP's features of them and of the points
    out (None when there are no candidates, or no point is out): the ``pending`` pool points,
    then the points off the pool ``pending_x`` (values), and their failure weights (None
    without a failure model)."""
    rng = np.random.default_rng([int(spec["seed"]), n])
    candidates = pool.subsample(
        spec["pool_subsample"], rng, exclude=sorted(set(exclude) | set(pending))
    )
    if not len(candidates):
        return candidates, None, None, None
    features = space.features(pool.points(candidates))
    weights = None
    if failure is not None:  # the failure model's weights, its points below min_success left out
        between = failure.between(features)
        keep, p = failure.weigh(features, between)
        failure.excluded = int((~keep).sum())
        failure.bracketed = int((between & keep).sum())
        candidates, features, weights = candidates[keep], features[keep], torch.from_numpy(p[keep])
        if not len(candidates):
            return candidates, None, None, None
    return (
        candidates,
        torch.from_numpy(features),
        pending_features(space, pool, pending, pending_x),
        weights,
    )


def pending_features(space, pool, pending, pending_x=()) -> torch.Tensor | None:
    """The GP's features of the points out: pool points ``pending``, then points off the pool
    ``pending_x`` (values); None when none is out."""
    parts = []
    if len(pending):
        parts.append(space.features(pool.points(list(pending))))
    if len(pending_x):
        parts.append(space.to_gp(list(pending_x)))
    return torch.from_numpy(np.concatenate(parts)) if parts else None


T = TypeVar("T")


# A ranking is a generator of steps (:func:`ranked`): each scoring it needs is yielded as a
# ToScore, and whoever drives it sends the scores back. Each candidate's score depends on it
# alone, so the driver may score them in parts on other workers (the refit job:
# service.jobs.fanout), which rebuild the Scoring from plain data; :func:`here` scores them all
# in this process. The math so never calls the layers above it.
@dataclass(frozen=True)
class ToScore:
    """A step of a ranking: ``fn``'s scores of ``candidates`` (a tensor of one per row), sent
    back to the ranking by its driver."""

    fn: Scoring
    candidates: torch.Tensor


Steps = Generator[ToScore, torch.Tensor, T]


def here(steps: Steps[T]) -> T:
    """Drive a ranking's steps in this process: each scoring done here; the ranking's result."""
    try:
        step = next(steps)
        while True:
            step = steps.send(step.fn(step.candidates))
    except StopIteration as done:
        return done.value


# Screening: where a scoring's work (draws x candidates x n^2) exceeds SCREEN_WORK, every
# candidate is first scored on SCREEN_DRAWS of the draws, and only the SCREEN_KEEP best of those
# rough scores are scored on all of them; the rest rank below them. The ranking and the scores
# kept are then exact wherever the exact best are among those kept (docs/benchmarks.md, "When
# sampling stops and what scoring costs", measures how often). The acquisitions screened are
# those whose cost is the variances; b-qbc reads the means alone, alm one draw, random none.
SCREENED = frozenset({"b-alm", "qb-mgp", "bald", "bald-code", "bald-std"})
SCREEN_DRAWS = 15
SCREEN_KEEP = SHORTLIST  # a greedy batch picks among as many (worker.acquisition.greedy_batch)
SCREEN_WORK = 150 * 10_000 * 100**2  # the defaults' scoring at n = 100
# Past a few hundred labels the exact scores of SCREEN_KEEP candidates cost as much as the
# screen itself; there fewer are kept, as many as EXACT_WORK pays for (that of 256 candidates'
# with 150 draws at n = 1,000), and at least KEEP_LEAST: 1,000 up to n = 506, 256 from
# n = 1,000. At n = 1,000 the exact best was the screen's own best (docs/benchmarks.md, "Large
# campaigns").
KEEP_LEAST = 256
EXACT_WORK = 150 * KEEP_LEAST * 1000**2
# From SCREEN_FEW_FROM labels the screen's n^2 per candidate and draw is most of a refit's
# scoring, and the posterior has narrowed: the screen takes SCREEN_DRAWS_FEW of the draws. At
# Hartmann 6-D, 1,001 and 2,001 labels, a screen on 3, 5, 8 or 15 draws put the exact best
# (every draw, every candidate) first (docs/benchmarks.md, issue 53).
SCREEN_FEW_FROM = 1000
SCREEN_DRAWS_FEW = 5
# From EXACT_FEW_FROM labels the exact pass (the kept candidates' exact scores and the accuracy
# estimates, one factorization and one triangular inverse per distinct draw) is most of a
# refit's ranking: it takes EXACT_DRAWS_FEW of the draws, spread evenly over them. At Hartmann
# 6-D, 2,001 labels, each of three disjoint sets of 50 of the 150 draws chose the exact best (on
# all 150) and gave the LOO RMSE within 0.1%, the integrated variance within 0.7% of all 150's,
# in 20 s against 34 (docs/benchmarks.md, issue 53).
EXACT_FEW_FROM = 1000
EXACT_DRAWS_FEW = 50
# A parallel campaign's greedy batch keeps fewer than this from its screen from about 720
# labels (with 150 draws): too few to share among workers, so they are scored, and the batch
# picked, on the accuracy estimates' factors (:func:`shared_batch`). At 801 labels of Hartmann
# 6-D with 20 points out: the same batch of 20 as the picks on their own factors, scores within
# 4e-16, in a third of the ranking's CPU time (docs/benchmarks.md, issue 53).
BATCH_SHARED_BELOW = 500


def screens(name: str, fn: Scoring, candidates) -> bool:
    """Whether :func:`scored` screens ``fn``'s scoring of ``candidates``."""
    return (
        name in SCREENED
        and len(candidates) > SCREEN_KEEP
        and fn.draws > SCREEN_DRAWS
        and fn.draws * len(candidates) * fn.labels**2 > SCREEN_WORK
    )


def screen_draws(fn: Scoring) -> int:
    """The draws a screen scores every candidate on: ``SCREEN_DRAWS``, ``SCREEN_DRAWS_FEW``
    from ``SCREEN_FEW_FROM`` labels."""
    return SCREEN_DRAWS_FEW if fn.labels >= SCREEN_FEW_FROM else SCREEN_DRAWS


def kept_count(fn: Scoring) -> int:
    """How many screened candidates :func:`scored` scores exactly: ``SCREEN_KEEP``, or fewer
    where their exact work (draws x kept x n^2) would pass ``EXACT_WORK``, down to
    ``KEEP_LEAST``."""
    affordable = EXACT_WORK // (fn.draws * fn.labels**2)
    return int(max(min(KEEP_LEAST, SCREEN_KEEP), min(SCREEN_KEEP, affordable)))


def scored(name: str, fn: Scoring, candidates, weights=None, exact=None) -> Steps[torch.Tensor]:
    """``fn``'s scores of ``candidates``, each scoring a step (its parts may be scored on other
    workers), screened where that pays (:func:`screens`): the rough scores weighed by
    ``weights`` (each candidate's probability of success, or None) choose the
    :func:`kept_count` scored exactly, and the others score ``-inf``. ``exact``: a function
    that scores the kept candidates here instead of a step (:func:`shares_factors`)."""
    if not screens(name, fn, candidates):
        return (yield ToScore(fn, candidates))
    rough = yield ToScore(fn.with_draws(screen_draws(fn)), candidates)
    if weights is not None:
        rough = rough * weights
    kept = torch.argsort(rough, descending=True, stable=True)[: kept_count(fn)]
    scores = torch.full((len(candidates),), -torch.inf, dtype=rough.dtype)
    if exact is not None:
        scores[kept] = exact(candidates[kept])
    else:
        scores[kept] = yield ToScore(fn, candidates[kept])
    return scores


def exact_draws(thin: Posterior, n: int) -> Posterior:
    """The draws of a refit on ``n`` labels that its exact pass takes: ``thin``'s, or
    ``EXACT_DRAWS_FEW`` of them from ``EXACT_FEW_FROM`` labels."""
    return thin.spread(EXACT_DRAWS_FEW) if n >= EXACT_FEW_FROM else thin


def shares_factors(name: str, fn: Scoring, candidates) -> bool:
    """Whether a ranking scores its kept candidates exactly in the pass of its accuracy
    estimates, on the same factors (one factorization per distinct draw for both, each
    ``n^3``): where it screens and keeps at most ``KEEP_LEAST`` (from about 1,000 labels with
    150 draws), too few to share among workers (``service.jobs.fanout`` shares 500 or more);
    a greedy batch of one output (:func:`shared_batch`), where it keeps fewer than
    ``BATCH_SHARED_BELOW`` (from about 720 labels) with at most ``KEEP_LEAST`` points out."""
    if not screens(name, fn, candidates):
        return False
    if fn.kind == "batch" and len(fn.outputs) == 1:
        out = 0 if fn.pending is None else len(fn.pending)
        return kept_count(fn) < BATCH_SHARED_BELOW and out <= KEEP_LEAST
    return fn.kind == "single" and kept_count(fn) <= KEEP_LEAST


def scores_of(name: str, fn: Scoring, candidates, weights=None, exact=None) -> Steps[torch.Tensor]:
    """``fn``'s scores of ``candidates`` (:func:`scored`), except ``random``'s, which are
    drawn for all the candidates at once (and cost nothing)."""
    if name == "random":
        return fn(candidates)
    return (yield from scored(name, fn, candidates, weights, exact))


def best_of(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows of the ``RANKING_SIZE`` highest scores, best first (ties in candidate order),
    and those scores."""
    best = np.argsort(-scores, kind="stable")[:RANKING_SIZE]
    return best, scores[best]


def ranking_of(space: Space, pool, candidates, best, best_scores) -> list[dict]:
    """The ranking a model keeps: ``[{index, x, score}]`` of the candidates' rows ``best``."""
    points = space.from_pool(pool.points(candidates[best]))
    return [
        {"index": int(candidates[b]), "x": p, "score": float(v)}
        for b, p, v in zip(best, points, best_scores, strict=True)
    ]


def greedy_batch(
    name: str,
    parts: list[tuple],
    cand_u,
    size: int,
    pending_u,
    seed: int,
    weights=None,
) -> Steps[tuple[np.ndarray, np.ndarray]]:
    """A greedy batch (:func:`worker.acquisition.greedy_batch_outputs`) whose first scoring is
    a step (:func:`scored`), each score weighed by ``weights`` (if any): the picked candidates'
    rows and their scores."""
    first = None
    if name != "random":  # random's scores are drawn by the batch itself
        outputs = tuple(Output(w, post, u, z, noise, seed) for w, post, u, z, noise in parts)
        fn = Scoring(name, outputs, "batch", pending_u)
        first = yield from scored(name, fn, cand_u, weights)
    order, scores = greedy_batch_outputs(
        name, parts, cand_u, size, pending_u, seed=seed, scores=first, weights=weights
    )
    return order.numpy(), scores.numpy()


def shared_batch(
    spec: dict, pool, data: Data, thin: Posterior, fn: Scoring, cand_u, size: int, weights=None
) -> Steps[tuple[np.ndarray, np.ndarray, dict]]:
    """A greedy batch on the factors of the accuracy estimates' pass (where
    :func:`shares_factors`): the screen a step, then the kept candidates' means and latent
    covariances, with the points out (``fn.pending``) as fantasies, from the same factors
    (:meth:`worker.fantasies.Fantasized.given`), and the picks by conditioning on them. The
    picked candidates' rows, their scores, and the estimates."""
    rough = yield ToScore(fn.with_draws(screen_draws(fn)), cand_u)
    if weights is not None:
        rough = rough * weights
    kept = torch.argsort(rough, descending=True, stable=True)[: kept_count(fn)]
    out = fn.pending is not None and len(fn.pending) > 0
    at = torch.cat([cand_u[kept], fn.pending]) if out else cand_u[kept]
    estimates, mean, covariance = accuracy_of(spec, pool, data, thin, at, joint=True)
    noise = exact_draws(thin, data.n).noise
    state = Fantasized(covariance, noise, mean)
    state = state.given(len(kept)) if out else state
    score, kept_weights = scorer(fn.name, noise), None if weights is None else weights[kept]

    def rescored(best: int) -> torch.Tensor:
        state.add(best)
        scores = score(state.mean, state.variances())
        return scores if kept_weights is None else scores * kept_weights

    first = score(state.mean, state.variances())
    first = first if kept_weights is None else first * kept_weights
    picked, scores = greedy_picks(first, size, rescored)
    return kept[picked].numpy(), scores.numpy(), estimates


def model_and_ranking(*args, **kwargs) -> tuple[dict, list]:
    """:func:`ranked` (the same arguments), every scoring done here."""
    return here(ranked(*args, **kwargs))


def ranked(
    spec: dict,
    pool: GridPool | PointPool,
    data: Data,
    post: Posterior,
    exclude: set[int],
    pending: list[int],
    started: float,
    failure: FailureModel | None = None,
    pending_x=(),
) -> Steps[tuple[dict, list]]:
    """Thin, then rank pool points not in ``exclude``: the ``RANKING_SIZE`` best, or in parallel
    mode a greedy batch of ``max_pending`` chosen with the ``pending`` pool points (out for
    labeling) and the points off the pool out (``pending_x``) as fantasies. Returns the model
    (the ``/model`` body of the OpenAPI document) and the ranking (``[{index, x, score}]``, in
    the order to hand out; a polished point's :mod:`worker.fitting.search`). The candidates'
    scoring is a
    step (:class:`ToScore`; a greedy batch's first scoring; its picks after that, here). With a
    ``failure`` model each score is weighed by the candidate's probability of success and the
    candidates below its ``min_success`` are left out (:func:`candidates_of`); the model holds
    it."""
    u, z, seed, n = data.u, data.z, data.seed, data.n
    name = spec["acquisition"]
    thin = post.for_scoring(spec["mcmc"])
    pool, exclude, pending, pending_x = search.box_candidates(
        spec, pool, data.space, n, exclude, pending, pending_x
    )
    candidates, cand_u, pending_u, weights = candidates_of(
        spec, pool, data.space, n, exclude, pending, failure, pending_x
    )
    ranking, estimates, searched = [], None, None
    parts = [(1.0, thin, u, z, data.noise)]
    if len(candidates) and spec.get("mode") == "parallel" and search.polishes(spec):
        fn = Scoring(name, (Output(1.0, thin, u, z, data.noise, seed),), "batch", pending_u)
        first = yield from scored(name, fn, cand_u, weights)
        objective = search.objective_of(spec, data.space, parts, pending_u, failure)
        ranking, searched = search.batch(
            spec, objective, pool.points(candidates), weighed(first, weights), n, u
        )
    elif len(candidates):
        if spec.get("mode") == "parallel":
            size = min(int(spec["max_pending"]), MAX_BATCH)
            fn = Scoring(name, (Output(1.0, thin, u, z, data.noise, seed),), "batch", pending_u)
            if shares_factors(name, fn, cand_u):
                best, best_scores, estimates = yield from shared_batch(
                    spec, pool, data, thin, fn, cand_u, size, weights
                )
            else:
                best, best_scores = yield from greedy_batch(
                    name, parts, cand_u, size, pending_u, seed, weights
                )
        else:
            fn = Scoring(name, (Output(1.0, thin, u, z, data.noise, seed),))
            exact = None
            if shares_factors(name, fn, cand_u):

                def exact(kept_u):
                    nonlocal estimates
                    estimates, mean, var = accuracy_of(spec, pool, data, thin, kept_u)
                    return scorer(name, exact_draws(thin, n).noise)(mean, var)

            scores = yield from scores_of(name, fn, cand_u, weights, exact)
            best, best_scores = best_of(weighed(scores, weights))
        ranking = ranking_of(data.space, pool, candidates, best, best_scores)
        if spec.get("mode") != "parallel" and search.polishes(spec):
            factors = None
            if estimates is None and n < EXACT_FEW_FROM and name != "alm":  # the same draws
                kept: list = []
                estimates = accuracy_of(spec, pool, data, thin, keep=kept)
                joined = zip(*kept, strict=True)  # one group (150 draws to 334 labels): no copy
                factors = [tuple(f[0] if len(f) == 1 else torch.cat(f) for f in joined)]
                del kept
            objective = search.objective_of(spec, data.space, parts, pending_u, failure, factors)
            starts = pool.points(candidates[best])
            polished, searched = search.polished(spec, objective, starts, n, u)
            ranking = polished + ranking
    if estimates is None:
        estimates = accuracy_of(spec, pool, data, thin)
    diagnostics = dict(post.diagnostics, refit_seconds=time.perf_counter() - started, seed=seed)
    model = {
        "version": n,
        "n_labeled": n,
        **post.to_dict(),
        "acquisition_samples": thin.to_dict()["samples"],
        "transform": {**data.space.transform(), **data.scale_y.to_dict()},
        "diagnostics": diagnostics,
        "accuracy": estimates,
    }
    if searched is not None:
        diagnostics["search"] = searched
    if data.space.typed:  # the lengthscales' columns, by name
        model["features"] = data.space.feature_names
    if data.input_scale is not None:
        model["input_scale"] = data.input_scale
    if failure is not None:
        model["failures"] = failure.to_dict()
    return model, search.off_pool(spec, ranking, n)


def weighed(scores: torch.Tensor, weights: torch.Tensor | None) -> np.ndarray:
    """``scores x weights`` (each candidate's probability of success), or the scores."""
    return (scores if weights is None else scores * weights).numpy()


def accuracy_of(
    spec: dict,
    pool: GridPool | PointPool,
    data: Data,
    thin: Posterior,
    at=None,
    joint=False,
    keep: list | None = None,
):
    """The model's ``accuracy`` (:func:`worker.accuracy.summary`) under the draws acquisitions
    use (those of the exact pass, :func:`exact_draws`), integrated over a subsample of the whole
    pool (labeled points included) of at most ``accuracy.POOL_POINTS`` points, drawn from the
    campaign's seed alone: the same points for every model, so that the estimates over the
    labels differ by the models, not the points (a continuous pool's: a Sobol sample of the
    box, :mod:`worker.vocabulary.box`).
    With candidates ``at``: the estimates, and the draws' means and variances there from the
    same factors (:func:`worker.accuracy.summary_at`; ``joint``: the latent covariances there
    in place of the variances). ``keep``: a list that receives the draws' Cholesky factors
    (:func:`worker.accuracy.summary_at`)."""
    size = min(int(spec["pool_subsample"]), accuracy.POOL_POINTS)
    if box.continuous(spec):  # a sample of the box, the same for every model
        seed = [int(spec["seed"]), box.ACCURACY_KEY]
        sample = box.candidates(data.space, size, seed, of_spec(spec))
    else:
        rng = np.random.default_rng([int(spec["seed"]), 2**32])
        sample = pool.points(pool.subsample(size, rng))
    points = torch.from_numpy(data.space.features(sample))
    thin = exact_draws(thin, data.n)
    args = (data.u, data.z, thin.lengthscale, thin.noise, points, data.scale_y.std)
    if at is not None:
        return accuracy.summary_at(
            *args, at, label_noise=data.noise, scale_y=data.scale_y, joint=joint, keep=keep
        )
    return accuracy.summary(*args, label_noise=data.noise, scale_y=data.scale_y, keep=keep)
