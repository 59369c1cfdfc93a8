"""A refit's search beyond its candidates (the campaign's ``search``,
:func:`worker.vocabulary.defaults.search_options`): its best candidates polished over the box
(:mod:`worker.polish`), as ranking entries of points that need not be the pool's.

A polished entry is ``{"index": None, "point": "<version>.p<k>", "x", "score"}``: no pool
index, a key that names it among the model's entries (the ``k``-th polished point of model
``version``) while it is out, and its values as they are handed out (each input's
:meth:`worker.vocabulary.space.Space.from_pool`). A continuous pool's candidates
(:mod:`worker.vocabulary.box`) are such entries too, ``"<version>.c<row>"``."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import torch

from fbgp_al.worker.differentiable import Acquisition
from fbgp_al.worker.feasibility.campaign import FailureModel
from fbgp_al.worker.mcmc import Posterior
from fbgp_al.worker.polish import (
    Objective,
    Region,
    distinct_best,
    polish,
    polished_batch,
)
from fbgp_al.worker.vocabulary import box
from fbgp_al.worker.vocabulary.constraints import of_spec
from fbgp_al.worker.vocabulary.defaults import MAX_BATCH, search_options
from fbgp_al.worker.vocabulary.design import PointPool
from fbgp_al.worker.vocabulary.space import Space

# A polish holds a Cholesky factor (n x n) for each draw it climbs on: at most this many elements
# in all (1.2 GB). Past it the draws are spread evenly, fewer of them: all 150 of a default
# campaign's up to 1,000 labels, 37 at 2,000, 6 at 5,000 (a refit's job may map 4 GB more than
# its worker, ``job_memory_mb``).
POLISH_ELEMENTS = 150 * 1000**2


def climbed(post: Posterior, n: int) -> Posterior:
    """The draws of ``post`` a polish climbs on at ``n`` labels: all of them, or as many as
    ``POLISH_ELEMENTS`` holds, evenly spaced over them (one chain of them)."""
    most = max(1, POLISH_ELEMENTS // max(1, n) ** 2)
    if post.size <= most:
        return post
    rows = torch.from_numpy(np.linspace(0, post.size - 1, most).round().astype(np.int64))
    return replace(post, lengthscale=post.lengthscale[rows], noise=post.noise[rows], chains=1)


def polishes(spec: dict) -> bool:
    """Whether the campaign's refits polish their best candidates."""
    return search_options(spec)[0] and spec["acquisition"] != "random"


def objective_of(
    spec: dict,
    space: Space,
    parts: list[tuple],
    pending_u,
    failure: FailureModel | None,
    factors=None,
) -> Objective:
    """The objective a polish climbs: the campaign's acquisition of the outputs ``parts``
    (``(weight, thinned draws, u, z, label_noise)`` each), the points out ``pending_u`` (GP
    features, or None) as fantasies, weighed by the ``failure`` model, in the box cut by the
    campaign's constraints; ``factors``: each output's draws' factors where the refit has
    them (:class:`worker.differentiable.Acquisition`), used where the polish climbs on all of
    the draws (:func:`climbed`)."""
    climbing = [(w, climbed(post, len(u)), u, z, noise) for w, post, u, z, noise in parts]
    if factors is not None:
        factors = [
            f if mine[1] is theirs[1] else None
            for f, mine, theirs in zip(factors, climbing, parts, strict=True)
        ]
    acquisition = Acquisition(spec["acquisition"], climbing, pending_u, factors)
    return Objective(acquisition, Region(space, of_spec(spec)), failure)


def entries(space: Space, points: np.ndarray, values: np.ndarray, version: int) -> list[dict]:
    """Polished points (pool coordinates) and their objectives as ranking entries."""
    xs = space.from_pool(points) if len(points) else []
    return [
        {"index": None, "point": f"{version}.p{k}", "x": x, "score": float(v)}
        for k, (x, v) in enumerate(zip(xs, values, strict=True))
    ]


def polished(
    spec: dict, objective: Objective, starts: np.ndarray, version: int, labeled_u
) -> tuple[list[dict], dict]:
    """A sequential refit's polished entries from ``starts`` (pool coordinates of its best
    candidates, best first; the campaign's ``starts`` of them), best first and each once, none
    at a labeled point (``labeled_u``, GP features) unless the campaign allows repeats, and
    what the search did (the model's ``diagnostics.search``)."""
    began = time.perf_counter()
    count = search_options(spec)[1]
    avoid = None if spec.get("allow_repeats", False) else labeled_u
    points, values = distinct_best(*polish(objective, starts[:count], avoid))
    seconds = time.perf_counter() - began
    return entries(objective.region.space, points, values, version), report(count, seconds)


def batch(
    spec: dict,
    objective: Objective,
    candidates: np.ndarray,
    scores: np.ndarray,
    version: int,
    labeled_u,
) -> tuple[list[dict], dict]:
    """A parallel refit's greedy batch of polished picks (:func:`worker.polish.polished_batch`)
    among ``candidates`` (pool coordinates) with their first ``scores`` (weighed), none at a
    labeled point (``labeled_u``) unless the campaign allows repeats, and what the search
    did."""
    began = time.perf_counter()
    count = search_options(spec)[1]
    size = min(int(spec["max_pending"]), MAX_BATCH)
    avoid = None if spec.get("allow_repeats", False) else labeled_u
    points, values = polished_batch(objective, candidates, scores, size, count, avoid=avoid)
    seconds = time.perf_counter() - began
    return entries(objective.region.space, points, values, version), report(count, seconds)


def report(starts: int, seconds: float) -> dict:
    return {"polish": True, "starts": starts, "seconds": seconds}


def box_candidates(spec: dict, pool, space: Space, n: int, exclude, pending, pending_x):
    """What a refit on ``n`` labels ranks: ``(pool, exclude, pending, pending_x)`` as given, or,
    for a continuous pool, a fresh Sobol sample of the box (``pool_subsample`` points seeded by
    the campaign's seed and ``n``, :func:`worker.vocabulary.box.candidates`) with nothing to
    exclude, its design's points out (``pending``, indices of the stored design) among the
    points off the pool out."""
    if not box.continuous(spec):
        return pool, exclude, pending, pending_x
    out = list(pending_x) + (space.from_pool(pool.points(list(pending))) if len(pending) else [])
    size, seed = int(spec["pool_subsample"]), [int(spec["seed"]), int(n)]
    return PointPool(box.candidates(space, size, seed, of_spec(spec))), set(), [], out


def off_pool(spec: dict, ranking: list[dict], version: int) -> list[dict]:
    """A continuous pool's ranking entries as points off the pool (keys ``<version>.c<row>``);
    another pool's as they are."""
    if not box.continuous(spec):
        return ranking
    return [
        dict(r, index=None, point=f"{version}.c{r['index']}") if r["index"] is not None else r
        for r in ranking
    ]
