"""A campaign's pool and input scaling, from its spec (the geometry is
:mod:`worker.vocabulary.design`'s, the inputs' types :mod:`worker.vocabulary.space`'s). Inputs map
to the unit cube by the declared bounds: ``u = (x - lower) / (upper - lower)`` for a float input
(the manual's "How it works"), on the log scale for a log input, by value index for a choice.

An explicit pool's points are kept apart from the spec (the store keeps them as raw float64
codes, :meth:`worker.vocabulary.space.Space.codes`: a value, or a choice's index, and reads one row
for ``/next``): the spec as stored names only their count, :func:`stored_pool`, so reading a
campaign's spec costs the same for a pool of ten points as for one of a million.

A campaign's constraints (:mod:`worker.vocabulary.constraints`) shape the pool that :func:`pool_of`
gives every caller (the design, its reserve, a refit's candidates, the nearest-point look-ups):
a grid is a :class:`worker.vocabulary.feasible.FeasibleGrid` (its points outside never drawn or
snapped to); an explicit pool keeps only the points inside, dropped at creation
(:mod:`service.schemas.constraints`), so its stored points are all feasible."""

from __future__ import annotations

import numpy as np

from fbgp_al.worker.vocabulary import box
from fbgp_al.worker.vocabulary.constraints import of_spec
from fbgp_al.worker.vocabulary.design import GridPool, PointPool
from fbgp_al.worker.vocabulary.feasible import FeasibleGrid
from fbgp_al.worker.vocabulary.space import Space


def space_of(spec: dict) -> Space:
    return Space.of(spec["inputs"])


def to_unit(spec: dict, x) -> np.ndarray:
    """``x``: ``m`` points (values) -> ``m x d`` pool coordinates in the unit cube."""
    return space_of(spec).to_pool(x)


def to_original(spec: dict, u) -> list[list]:
    """The inverse of :func:`to_unit` (each value snapped to its input's nearest)."""
    return space_of(spec).from_pool(u)


def explicit(spec: dict) -> bool:
    """Whether the campaign's pool is stored points (not a grid): a list of points, or a
    continuous pool's initial design and reserve (:mod:`worker.vocabulary.box`)."""
    return spec["pool"]["type"] in ("points", "continuous")


def stored_pool(pool: dict) -> dict:
    """The spec's ``pool`` as the store keeps it: a grid as declared; stored points as their
    count (``{"type": "points", "size": m}``, ``{"type": "continuous", "size": m}``), the
    points themselves stored apart."""
    if pool["type"] in ("points", "continuous") and "points" in pool:
        return {"type": pool["type"], "size": len(pool["points"])}
    return pool


def with_box_design(spec: dict, reserve: int) -> dict:
    """A continuous pool's campaign with its initial design and ``reserve`` more points as its
    stored points (values, :func:`worker.vocabulary.box.design_points`), the design first:
    another campaign as it is."""
    if spec["pool"]["type"] != "continuous":
        return spec
    space = space_of(spec)
    size = int(spec["initial_design"]["size"])
    points = box.design_points(space, size, reserve, int(spec["seed"]), of_spec(spec))
    return dict(spec, pool={"type": "continuous", "points": space.from_pool(points)})


def pool_of(spec: dict, codes=None) -> GridPool | PointPool:
    """The campaign's pool in the unit cube. ``codes``: an explicit pool's points as stored
    (``m x d`` codes, :meth:`worker.vocabulary.space.Space.codes`) where the spec keeps only their
    count. A grid holds each input's distinct levels (:meth:`worker.vocabulary.space.Space.axes`);
    with constraints, only those inside them count
    (:class:`worker.vocabulary.feasible.FeasibleGrid`)."""
    space = space_of(spec)
    pool = spec["pool"]
    if pool["type"] == "grid":
        per_dim = int(pool["points_per_dim"])
        constraints = of_spec(spec)
        if constraints is None:  # as every campaign created before constraints existed
            return GridPool(dim=space.dim, points_per_dim=per_dim, axes=space.axes(per_dim))
        return FeasibleGrid(
            dim=space.dim, points_per_dim=per_dim, axes=space.axes(per_dim), constraints=constraints
        )
    if codes is None:
        codes = space.codes(pool["points"])
    return PointPool(space.code_to_pool(codes))


def grid_point(spec: dict, index: int) -> list:
    """Point ``index`` of a grid pool, as values."""
    return to_original(spec, pool_of(spec).points([index]))[0]


def pool_index_of(spec: dict, pool: GridPool | PointPool, x: list[list]) -> list[int | None]:
    """Pool index of each point that is (to rounding) a pool point, else None: a grid point
    outside the campaign's constraints is no pool point."""
    u = to_unit(spec, x)
    if isinstance(pool, FeasibleGrid):
        index = pool.grid_index_of(u)
        hit = (np.abs(pool.points(index) - u).max(axis=1) < 1e-9) & pool.feasible(index)
    else:
        index = pool.index_of(u)
        hit = np.abs(pool.points(index) - u).max(axis=1) < 1e-9
    return [int(i) if h else None for i, h in zip(index, hit, strict=True)]
