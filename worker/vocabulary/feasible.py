"""A grid pool cut by a campaign's constraints (:mod:`worker.vocabulary.constraints`), still never
materialized: its points keep the grid's flat indices (so ``/next``'s look-up of a point, the
stored design and rankings read as for any grid), and only the feasible ones are ever drawn,
snapped to or counted.

- A grid of at most ``ENUMERATE`` points lists its feasible indices once (in chunks of
  ``CHUNK``): its size is exact, its draws are :func:`worker.vocabulary.design._subsample`'s over
  them.
- A larger grid is drawn from by rejection: uniform flat indices, the infeasible ones dropped.
  The feasible fraction is estimated once from ``FRACTION_SAMPLE`` indices drawn with a fixed
  seed (the same at creation and at every refit), and sizes each round's draws; one subsample
  draws at most ``MAX_DRAWS`` indices, so where the feasible part is a small share of the grid
  a refit scores fewer candidates than ``pool_subsample`` (about ``MAX_DRAWS x fraction``), and
  a campaign whose sample found no feasible point is refused at creation.
- The nearest feasible point to a point off the feasible part (the initial design's snapping):
  exact among the listed points of a small grid; on a large one, the nearest of a seeded draw
  of ``NEAREST_SAMPLE`` feasible points, then a pattern search over the grid's neighbours
  (steps along one or two axes, halved down to one level) through feasible points only.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from fbgp_al.worker.vocabulary.constraints import Constraints
from fbgp_al.worker.vocabulary.design import GridPool, PointPool, _subsample

ENUMERATE = 2**20  # grids of at most this many points list their feasible points
CHUNK = 2**18  # points evaluated at once
FRACTION_SAMPLE = 2**16  # draws that estimate a large grid's feasible fraction
FRACTION_SEED = 0xFEA5  # fixed: the same estimate wherever the pool is built
MAX_DRAWS = 2**24  # indices one subsample of a large grid draws, at most
NEAREST_SAMPLE = 2**12  # feasible points the nearest-point search starts from
LISTED_NEAREST = 2**23  # coordinates of listed points a nearest-point look-up may hold
PAIR_MOVES_DIM = 8  # the pattern search also steps along two axes at once up to this dimension


@dataclass(frozen=True, eq=False)
class FeasibleGrid(GridPool):
    """A :class:`worker.vocabulary.design.GridPool` whose points outside ``constraints`` are never
    drawn (:meth:`subsample`), snapped to (:meth:`index_of`) or counted (:attr:`size`). Flat
    indices are the grid's (``0 <= index < total``)."""

    constraints: Constraints | None = None

    @property
    def total(self) -> int:
        """The grid's points, feasible or not (its flat indices' range)."""
        return GridPool.size.fget(self)

    def feasible(self, index) -> np.ndarray:
        """Whether each of the flat indices ``index`` is a feasible point."""
        index = np.asarray(index, dtype=np.int64).reshape(-1)
        out = np.empty(len(index), dtype=bool)
        for start in range(0, len(index), CHUNK):
            part = index[start : start + CHUNK]
            out[start : start + CHUNK] = self.constraints.holds_at(self._named_points(part))
        return out

    def _named_points(self, index: np.ndarray) -> np.ndarray:
        """:meth:`points` at ``index`` in the columns of the inputs the constraints name only
        (the others 0): a grid of many inputs is not unravelled in all of them."""
        shape = self.shape
        strides = np.cumprod((1,) + shape[:0:-1], dtype=np.int64)[::-1]
        u = np.zeros((len(index), self.dim))
        for j in self.constraints.columns:
            digit = (index // strides[j]) % shape[j]
            axis = None if self.axes is None else self.axes[j]
            u[:, j] = digit / (self.points_per_dim - 1) if axis is None else np.asarray(axis)[digit]
        return u

    @cached_property
    def listed(self) -> np.ndarray | None:
        """The feasible flat indices, ascending, of a grid of at most ``ENUMERATE`` points;
        None for a larger one."""
        if self.total > ENUMERATE:
            return None
        parts = []
        for start in range(0, self.total, CHUNK):
            index = np.arange(start, min(self.total, start + CHUNK), dtype=np.int64)
            parts.append(index[self.feasible(index)])
        return np.concatenate(parts)

    @cached_property
    def sample_hits(self) -> tuple[int, int]:
        """``(feasible, drawn)``: exact for a listed grid, else of the seeded sample."""
        if self.listed is not None:
            return len(self.listed), self.total
        rng = np.random.default_rng(FRACTION_SEED)
        drawn = rng.integers(0, self.total, size=FRACTION_SAMPLE, dtype=np.int64)
        return int(self.feasible(drawn).sum()), FRACTION_SAMPLE

    @property
    def fraction(self) -> float:
        """The share of the grid's points that are feasible (estimated on a large grid)."""
        hits, drawn = self.sample_hits
        return hits / drawn

    @property
    def size(self) -> int:
        """The feasible points: counted on a listed grid, estimated on a larger one."""
        if self.listed is not None:
            return len(self.listed)
        return int(round(self.fraction * self.total))

    def subsample(self, size: int, rng: np.random.Generator, exclude=()) -> np.ndarray:
        """Up to ``size`` distinct feasible flat indices drawn uniformly, none in ``exclude``."""
        exclude = np.unique(np.asarray(list(exclude), dtype=np.int64))
        listed = self.listed
        if listed is not None:
            if not len(listed):
                return np.empty(0, dtype=np.int64)
            at = np.clip(np.searchsorted(listed, exclude), 0, len(listed) - 1)
            return listed[_subsample(len(listed), size, rng, at[listed[at] == exclude])]
        return self._rejected(size, rng, exclude)

    def _rejected(self, size: int, rng: np.random.Generator, exclude: np.ndarray) -> np.ndarray:
        """Rejection over the flat indices, at most ``MAX_DRAWS`` of them."""
        chosen = np.empty(0, dtype=np.int64)
        fraction = max(self.fraction, 1.0 / FRACTION_SAMPLE)
        drawn = 0
        while len(chosen) < size and drawn < MAX_DRAWS:
            want = int(1.25 * (size - len(chosen)) / fraction) + 64
            batch = min(want, CHUNK, MAX_DRAWS - drawn)
            draw = rng.integers(0, self.total, size=batch, dtype=np.int64)
            drawn += batch
            draw = draw[self.feasible(draw)]
            chosen = np.union1d(chosen, np.setdiff1d(draw, exclude))
        if len(chosen) > size:
            chosen = rng.choice(chosen, size=size, replace=False)
        return np.sort(chosen)

    def grid_index_of(self, u) -> np.ndarray:
        """The flat index of the grid point nearest to each row of ``u``, feasible or not."""
        return GridPool.index_of(self, u)

    def index_of(self, u) -> np.ndarray:
        """The flat index of a feasible point near each row of ``u`` (``m x d``): the nearest
        grid point where it is feasible, else the nearest feasible one (exact on a listed grid;
        a pattern search on a larger one, module docstring)."""
        u = np.atleast_2d(np.asarray(u, dtype=np.float64))
        index = np.asarray(self.grid_index_of(u), dtype=np.int64).reshape(-1)
        off = np.flatnonzero(~self.feasible(index))
        if len(off):
            index[off] = self._nearest(u[off])
        return index

    @cached_property
    def _listed_pool(self) -> PointPool | None:
        listed = self.listed
        if listed is None or not len(listed) or len(listed) * self.dim > LISTED_NEAREST:
            return None
        return PointPool(self.points(listed))

    @cached_property
    def _start(self) -> np.ndarray:
        """``NEAREST_SAMPLE`` feasible indices, drawn once with the fixed seed."""
        size = min(NEAREST_SAMPLE, max(1, self.size // 2))  # not all of a small feasible part
        start = self.subsample(size, np.random.default_rng(FRACTION_SEED))
        if not len(start):
            raise ValueError("the constraints leave no point of the grid")
        return start

    def _nearest(self, rows: np.ndarray) -> np.ndarray:
        if self._listed_pool is not None:
            return self.listed[self._listed_pool.index_of(rows)]
        points = self.points(self._start)
        first = np.array([int(np.argmin(((points - row) ** 2).sum(1))) for row in rows])
        return self._descend(rows, self._start[first])

    def nearest_free(self, row: np.ndarray, taken) -> int | None:
        """A feasible point near ``row`` that is not in ``taken`` (the initial design's next
        point where its nearest is taken), from the same start as :meth:`index_of`'s on a
        large grid, so that a design of many points does not draw anew for each; None on a
        listed grid, whose draws cost little (:func:`worker.vocabulary.design._nearest_free`'s)."""
        if self.listed is not None:
            return None
        taken = set(taken)
        free = np.array([i for i in self._start.tolist() if i not in taken], dtype=np.int64)
        if not len(free):
            raise ValueError("no feasible point left for the initial design")
        best = free[int(np.argmin(((self.points(free) - row) ** 2).sum(1)))]
        found = int(self._descend(np.asarray(row)[None], np.array([best]))[0])
        return found if found not in taken else int(best)

    def _moves(self) -> np.ndarray:
        d = self.dim
        moves = [s * np.eye(d, dtype=np.int64)[j] for j in range(d) for s in (1, -1)]
        if d <= PAIR_MOVES_DIM:
            for i in range(d):
                for j in range(i + 1, d):
                    for si in (1, -1):
                        for sj in (1, -1):
                            m = np.zeros(d, dtype=np.int64)
                            m[i], m[j] = si, sj
                            moves.append(m)
        return np.array(moves)

    def _descend(self, target: np.ndarray, start: np.ndarray) -> np.ndarray:
        """From feasible flat indices ``start``, feasible grid points nearer to ``target``
        (a pattern search: every step keeps to feasible points and comes nearer)."""
        shape = np.array(self.shape, dtype=np.int64)
        digits = np.stack(np.unravel_index(start, self.shape), axis=-1).astype(np.int64)
        dist = ((self.points(start) - target) ** 2).sum(1)
        moves = self._moves()
        step = max(1, int(shape.max()) // 4)
        while step >= 1:
            for _ in range(64):  # rounds at this step, at most
                improved = False
                for move in moves:
                    cand = digits + step * move
                    ok = ((cand >= 0) & (cand < shape)).all(1)
                    if not ok.any():
                        continue
                    rows = np.flatnonzero(ok)
                    index = np.ravel_multi_index(tuple(cand[rows].T), self.shape)
                    near = ((self.points(index) - target[rows]) ** 2).sum(1)
                    better = (near < dist[rows]) & self.feasible(index)
                    if better.any():
                        digits[rows[better]] = cand[rows[better]]
                        dist[rows[better]] = near[better]
                        improved = True
                if not improved:
                    break
            step //= 2
        return np.ravel_multi_index(tuple(digits.T), self.shape).astype(np.int64)
