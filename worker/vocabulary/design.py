"""The input box, pools of candidate inputs and the initial design (numpy and scipy only, no
torch: the API uses it too).

A pool is a finite set of candidate inputs in the unit cube ``[0, 1]^d``. A grid pool is never
materialized: its points are addressed by a flat index (row-major over the dimensions), so a grid
of ``100^6`` points costs nothing until a subset of it is drawn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree
from scipy.spatial.distance import pdist
from scipy.stats import qmc


@dataclass(frozen=True)
class Box:
    """A campaign's input box ``[lower, upper]`` (each of length ``d``), mapped affinely onto the
    unit cube ``[0, 1]^d`` (docs/concepts/how-it-works.md: inputs scale by the declared bounds,
    never by the data, so the scaling does not move as labels arrive)."""

    lower: tuple[float, ...]
    upper: tuple[float, ...]

    def __post_init__(self):
        if len(self.lower) != len(self.upper) or not self.lower:
            raise ValueError("lower and upper bounds need the same, non-zero length")
        if any(lo >= hi for lo, hi in zip(self.lower, self.upper, strict=True)):
            raise ValueError("every lower bound must be below its upper bound")

    @classmethod
    def of(cls, inputs: list[dict]) -> Box:
        """The box of a campaign body's ``inputs`` (``[{"name", "lower", "upper"}, ...]``)."""
        return cls(
            tuple(float(i["lower"]) for i in inputs), tuple(float(i["upper"]) for i in inputs)
        )

    def to_unit(self, x) -> np.ndarray:
        """``x``: ``m x d`` in original units -> ``m x d`` in the unit cube (float64)."""
        lower, upper = np.array(self.lower), np.array(self.upper)
        return (np.asarray(x, dtype=np.float64) - lower) / (upper - lower)

    def from_unit(self, u) -> np.ndarray:
        """``u``: ``m x d`` in the unit cube -> ``m x d`` in original units (float64)."""
        lower, upper = np.array(self.lower), np.array(self.upper)
        return lower + np.asarray(u, dtype=np.float64) * (upper - lower)


@dataclass(frozen=True)
class GridPool:
    """The grid ``{0, 1/(k-1), ..., 1}^d`` of ``k^d`` points, addressed by a flat index
    (row-major). ``axes``: per input, None for those ``k`` levels, or the input's own levels
    (ascending pool coordinates: an int input's snapped integers, a choice's values,
    :meth:`worker.vocabulary.space.Space.axes`), so that a grid of typed inputs holds each point
    once."""

    dim: int
    points_per_dim: int
    axes: tuple[tuple[float, ...] | None, ...] | None = None

    def __post_init__(self):
        if self.dim < 1 or self.points_per_dim < 2:
            raise ValueError("a grid pool needs dim >= 1 and points_per_dim >= 2")
        if self.axes is not None and (
            len(self.axes) != self.dim or any(a is not None and len(a) < 2 for a in self.axes)
        ):
            raise ValueError("a grid pool needs one axis of 2 levels or more per input")

    @property
    def shape(self) -> tuple[int, ...]:
        """The number of levels of each input."""
        if self.axes is None:
            return (self.points_per_dim,) * self.dim
        return tuple(self.points_per_dim if a is None else len(a) for a in self.axes)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def points(self, index) -> np.ndarray:
        """Points at flat indices ``index`` (shape ``m``) as an ``m x d`` array in the unit cube."""
        index = np.asarray(index, dtype=np.int64)
        digits = np.stack(np.unravel_index(index, self.shape), axis=-1)
        regular = digits / (self.points_per_dim - 1)
        if self.axes is None or digits.size == 0:
            return regular
        for j, a in enumerate(self.axes):
            if a is not None:
                regular[..., j] = np.asarray(a)[digits[..., j]]
        return regular

    def index_of(self, u) -> np.ndarray:
        """Flat index of the grid point nearest to each row of ``u`` (``m x d``)."""
        u = np.clip(np.asarray(u, dtype=float), 0, 1)
        digits = np.rint(u * (self.points_per_dim - 1)).astype(np.int64)
        if self.axes is not None:
            digits = digits.reshape(-1, self.dim)
            u = u.reshape(-1, self.dim)
            for j, a in enumerate(self.axes):
                if a is not None:
                    digits[:, j] = _nearest_level(np.asarray(a), u[:, j])
        return np.ravel_multi_index(tuple(digits.T), self.shape)

    def subsample(self, size: int, rng: np.random.Generator, exclude=()) -> np.ndarray:
        """Up to ``size`` distinct flat indices drawn uniformly, none of them in ``exclude``."""
        return _subsample(self.size, size, rng, exclude)


def _nearest_level(axis: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The index of the level of ``axis`` (ascending) nearest to each of ``u``."""
    right = np.clip(np.searchsorted(axis, u), 1, len(axis) - 1)
    left = right - 1
    return np.where(u - axis[left] <= axis[right] - u, left, right).astype(np.int64)


# a nearest-point look-up scans the pool for each row up to this many rows x pool points (about
# as long as building a k-d tree of a million points takes: docs/benchmarks.md, "Nearest pool
# points"); beyond, it builds the tree
BRUTE_FORCE_PAIRS = 10_000_000


@dataclass(frozen=True)
class PointPool:
    """An explicit list of candidate points (``N x d``, unit cube), addressed by row index."""

    array: np.ndarray

    def __post_init__(self):
        a = np.asarray(self.array, dtype=float)
        if a.ndim != 2 or len(a) == 0:
            raise ValueError("a point pool needs a non-empty N x d array")
        object.__setattr__(self, "array", a)

    @property
    def dim(self) -> int:
        return self.array.shape[1]

    @property
    def size(self) -> int:
        return len(self.array)

    def points(self, index) -> np.ndarray:
        return self.array[np.asarray(index, dtype=np.int64)]

    def index_of(self, u) -> np.ndarray:
        """Index of the pool point nearest to each row of ``u`` (``m x d``): by a scan of the
        pool per row while that is cheap (the first of equally near points), else by a k-d tree
        built once for all rows (``BRUTE_FORCE_PAIRS``)."""
        u = np.atleast_2d(np.asarray(u, dtype=float))
        if len(u) * self.size <= BRUTE_FORCE_PAIRS:
            return np.array(
                [int(np.argmin(((self.array - row) ** 2).sum(1))) for row in u], dtype=np.int64
            )
        return cKDTree(self.array).query(u)[1].astype(np.int64)

    def subsample(self, size: int, rng: np.random.Generator, exclude=()) -> np.ndarray:
        return _subsample(self.size, size, rng, exclude)


def _subsample(total: int, size: int, rng: np.random.Generator, exclude) -> np.ndarray:
    exclude = np.unique(np.asarray(list(exclude), dtype=np.int64))
    available = total - len(exclude)
    size = min(size, available)
    if size <= 0:
        return np.empty(0, dtype=np.int64)
    if total <= 4 * size + len(exclude) or total <= 1_000_000:
        # small enough to permute what is left
        keep = np.setdiff1d(np.arange(total, dtype=np.int64), exclude, assume_unique=True)
        return np.sort(rng.choice(keep, size=size, replace=False))
    # huge pool: rejection sampling of distinct indices, never building the whole range
    chosen = np.empty(0, dtype=np.int64)
    while len(chosen) < size:
        draw = rng.integers(0, total, size=2 * (size - len(chosen)) + 16, dtype=np.int64)
        chosen = np.union1d(chosen, np.setdiff1d(draw, exclude))
    return np.sort(rng.choice(chosen, size=size, replace=False))


# the work of a maximin search (tries x size^2 x dim, its pairwise distances) at most, so that a
# large design (1,000 points in 50 dimensions) costs a campaign's creation a fraction of a second
# rather than a quarter of a minute; small designs keep their 1,000 tries
LHS_WORK = 200_000_000
LHS_TRIES = (10, 1000)


def maximin_lhs(size: int, dim: int, seed: int, tries: int | None = None) -> np.ndarray:
    """The Latin hypercube (``size x dim``, unit cube) with the largest minimum pairwise distance
    among ``tries`` random ones (scipy.stats.qmc); by default 1,000, fewer (at least 10) where
    that many would exceed ``LHS_WORK``."""
    if tries is None:
        low, high = LHS_TRIES
        tries = max(low, min(high, LHS_WORK // max(1, size * size * dim)))
    rng = np.random.default_rng(seed)
    best, best_dist = None, -np.inf
    for _ in range(tries):
        x = qmc.LatinHypercube(d=dim, rng=rng).random(size)
        dist = pdist(x).min() if size > 1 else 0.0
        if dist > best_dist:
            best, best_dist = x, dist
    return best


def initial_design(pool: GridPool | PointPool, size: int, seed: int, warp=None) -> np.ndarray:
    """Flat pool indices of a maximin LHS of ``size`` points snapped to the pool, all distinct.

    A design point whose nearest pool point is already taken moves to its nearest free one.
    ``warp``: a map of the LHS's points before they snap
    (:meth:`worker.vocabulary.space.Space.stratify`: each value of a choice or an int input equally
    likely).
    """
    if size > pool.size:
        raise ValueError(f"an initial design of {size} points does not fit a pool of {pool.size}")
    design = maximin_lhs(size, pool.dim, seed)
    if warp is not None:
        design = warp(design)
    chosen: list[int] = []
    for row, index in zip(design, pool.index_of(design).tolist(), strict=True):
        if index in chosen:
            index = _nearest_free(pool, row, chosen)
        chosen.append(index)
    return np.array(chosen, dtype=np.int64)


def _nearest_free(pool, row, taken) -> int:
    free = getattr(pool, "nearest_free", None)  # a grid cut by constraints has its own way
    found = None if free is None else free(row, taken)
    if found is not None:
        return found
    rng = np.random.default_rng(0)
    candidates = pool.subsample(min(pool.size, 100_000), rng, exclude=taken)
    dist = ((pool.points(candidates) - row) ** 2).sum(1)
    return int(candidates[np.argmin(dist)])
