"""A multi-fidelity campaign's levels (numpy only: the API uses it too).

A campaign may declare ``fidelities``, ``[{"name", "cost"}, ...]``, lowest first; the last is
the level the metamodel is for (the top). Inside the service the level is one more coordinate of
each point: the spec as stored holds the declared inputs and after them a choice input named
``fidelity`` whose values are the levels' names (:func:`level_input`), so that the pool (a grid
has one more axis), the initial design, the tickets, the labels, the imports and the failure
model carry the level as they carry any choice input's value. The routes split it out of the
points they answer and join it to the points they take (:func:`split`, :func:`join`); the
refit reads it as the level's index (:func:`level_index`).

The initial design is nested (:func:`design_counts`, :func:`nested_design`): each level's points
are among the level below's, fewer the higher the level, as the autoregressive model learns each
``rho`` and discrepancy best from runs at the same points of two neighbouring levels.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import pdist
from scipy.stats import qmc

LEVEL = "fidelity"  # the name of the levels' coordinate, after the declared inputs
MIN_PER_LEVEL = 2  # runs of each level in the initial design, at least


def levels(spec: dict) -> list[str] | None:
    """The levels' names, lowest first; None for a campaign of one fidelity."""
    declared = spec.get("fidelities")
    return None if not declared else [f["name"] for f in declared]


def costs(spec: dict) -> list[float]:
    """Each level's cost, lowest first."""
    return [float(f["cost"]) for f in spec["fidelities"]]


def level_input(fidelities: list[dict]) -> dict:
    """The levels' coordinate as a choice input (its values the levels' names)."""
    return {"name": LEVEL, "type": "choice", "values": [f["name"] for f in fidelities]}


def with_level(body: dict) -> dict:
    """A campaign body as the store keeps it: with ``fidelities``, the levels' coordinate
    after the declared inputs (:func:`level_input`); unchanged otherwise."""
    if not body.get("fidelities"):
        return body
    return dict(body, inputs=[*body["inputs"], level_input(body["fidelities"])])


def declared_inputs(spec: dict) -> list[dict]:
    """The inputs as the campaign declared them: the stored ones less the levels' coordinate."""
    return spec["inputs"][:-1] if levels(spec) else spec["inputs"]


def split(spec: dict, x: list[list]) -> tuple[list[list], list[str] | None]:
    """Points as stored -> the points as declared and each one's level's name (None: one
    fidelity, the points unchanged)."""
    if not levels(spec):
        return x, None
    return [list(p[:-1]) for p in x], [p[-1] for p in x]


def join(x: list[list], names: list[str]) -> list[list]:
    """Points as declared and each one's level's name -> the points as stored."""
    return [[*p, name] for p, name in zip(x, names, strict=True)]


def level_index(spec: dict, names) -> np.ndarray:
    """Each level's name -> its index, 0 the lowest (ValueError for an unknown one)."""
    order = {name: t for t, name in enumerate(levels(spec))}
    try:
        return np.array([order[name] for name in names], dtype=np.int64)
    except KeyError as error:
        raise ValueError(f"unknown fidelity {error.args[0]!r}: one of {levels(spec)}") from None


def counts(spec: dict, labels: list[dict]) -> dict[str, int]:
    """The labels at each level, by name, lowest first."""
    out = dict.fromkeys(levels(spec), 0)
    for label in labels:
        out[label["x"][-1]] += 1
    return out


def spent(spec: dict, labels: list[dict]) -> float:
    """The cost of the labels stored: the sum of their levels' costs."""
    cost = dict(zip(levels(spec), costs(spec), strict=True))
    return float(sum(cost[label["x"][-1]] for label in labels))


def design_counts(size: int, n_levels: int) -> list[int]:
    """The initial design's runs at each level, lowest first, ``size`` in all: level ``t >= 1``
    gets ``size`` in proportion to ``2^(T-1-t)`` (the top 1, the one below 2, ...) and at
    least :data:`MIN_PER_LEVEL`, the lowest the rest; never more at a level than below it
    (``size >= MIN_PER_LEVEL * n_levels``, else ValueError)."""
    if size < MIN_PER_LEVEL * n_levels:
        raise ValueError(
            f"an initial design of {size} runs is too small for {n_levels} fidelities: it "
            f"needs {MIN_PER_LEVEL} or more at each level ({MIN_PER_LEVEL * n_levels})"
        )
    weights = [2 ** (n_levels - 1 - t) for t in range(n_levels)]
    upper = [max(MIN_PER_LEVEL, size * w // sum(weights)) for w in weights[1:]]
    return [size - sum(upper), *upper]


def centered_maximin(size: int, dim: int, seed: int, tries: int = 200) -> np.ndarray:
    """The Latin hypercube of ``size`` points at their strata's centres (``size x dim``) with
    the largest minimum pairwise distance among ``tries`` seeded permutations: space-filling,
    and no point on the box's faces, where a level's few expensive runs teach least."""
    rng = np.random.default_rng([seed, 7])
    best, best_dist = None, -np.inf
    for _ in range(tries):
        x = qmc.LatinHypercube(d=dim, scramble=False, rng=rng).random(size)
        dist = pdist(x).min() if size > 1 else 0.0
        if dist > best_dist:
            best, best_dist = x, dist
    return best


def nested_design(pool, space, design_size: int, n_levels: int, seed: int) -> np.ndarray:
    """Pool indices of a nested initial design (:func:`design_counts` runs per level), the
    lowest level's first: the top level's points a maximin Latin hypercube of the declared
    inputs (:func:`centered_maximin`), and each level below one of its own count whose rows nearest
    to the level above's points are replaced by them (so every level's points are among the
    level below's, and the top's are no corner picks of the cheap design); each value of a
    choice or int input equally likely (:meth:`worker.vocabulary.space.Space.stratify`), each
    point snapped to the pool's nearest point at its level that is not taken (``space``: the
    stored inputs, the levels' coordinate last)."""
    per_level = design_counts(design_size, n_levels)
    dim = space.dim - 1
    points = [np.empty((0, dim))] * n_levels
    points[-1] = centered_maximin(per_level[-1], dim, seed)
    for t in range(n_levels - 2, -1, -1):
        own, upper = centered_maximin(per_level[t], dim, seed + n_levels - t), points[t + 1]
        free = list(range(len(own)))
        for p in upper:  # each point of the level above takes its nearest row's place
            j = min(free, key=lambda k: float(((own[k] - p) ** 2).sum()))
            free.remove(j)
        points[t] = np.r_[upper, own[free]]
    chosen: list[int] = []
    for t, rows in enumerate(points):
        rows = space.stratify(np.c_[rows, np.full(len(rows), t / (n_levels - 1))])
        rows[:, -1] = t / (n_levels - 1)
        for row, index in zip(rows, pool.index_of(rows).tolist(), strict=True):
            at = pool.points([index])[0]
            if index in chosen or abs(at[-1] - row[-1]) > 1e-9:
                index = _nearest_free_at_level(pool, row, chosen)
            chosen.append(int(index))
    return np.array(chosen, dtype=np.int64)


def _nearest_free_at_level(pool, row, taken) -> int:
    """The pool point at ``row``'s level nearest to it, of those not ``taken`` (among at most
    100,000 drawn; ValueError if none is at that level)."""
    rng = np.random.default_rng(0)
    candidates = pool.subsample(min(pool.size, 100_000), rng, exclude=taken)
    points = pool.points(candidates)
    same = np.abs(points[:, -1] - row[-1]) < 1e-9
    if not same.any():
        raise ValueError("no pool point is left at one of the levels for the initial design")
    dist = ((points[same] - row) ** 2).sum(1)
    return int(candidates[same][np.argmin(dist)])
