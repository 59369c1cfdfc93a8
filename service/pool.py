"""A campaign's pool and input scaling, from its spec, for the API (the geometry and the box
themselves are the torch-free :mod:`worker.design`'s). Inputs map to the unit cube by the
declared bounds: ``u = (x - lower) / (upper - lower)`` (CONTRACT.md).

An explicit pool's points are kept apart from the spec (:class:`~service.store.CampaignStore`
keeps them as raw float64 and reads one row for ``/next``): the spec as stored names only their
count, :func:`stored_pool`, so reading a campaign's spec costs the same for a pool of ten points
as for one of a million."""

from __future__ import annotations

import numpy as np

from worker.design import Box, GridPool, PointPool


def to_unit(spec: dict, x) -> np.ndarray:
    """``x``: ``m x d`` in original units -> ``m x d`` in the unit cube."""
    return Box.of(spec["inputs"]).to_unit(x)


def to_original(spec: dict, u) -> np.ndarray:
    """The inverse of :func:`to_unit`."""
    return Box.of(spec["inputs"]).from_unit(u)


def explicit(spec: dict) -> bool:
    """Whether the campaign's pool is a list of points (not a grid)."""
    return spec["pool"]["type"] == "points"


def stored_pool(pool: dict) -> dict:
    """The spec's ``pool`` as the store keeps it: a grid as declared; a list of points as its
    count (``{"type": "points", "size": m}``), the points themselves stored apart."""
    if pool["type"] == "points" and "points" in pool:
        return {"type": "points", "size": len(pool["points"])}
    return pool


def pool_of(spec: dict, points=None) -> GridPool | PointPool:
    """The campaign's pool in the unit cube. ``points``: an explicit pool's points (``m x d``,
    original units) where the spec keeps only their count."""
    box = Box.of(spec["inputs"])
    pool = spec["pool"]
    if pool["type"] == "grid":
        return GridPool(dim=len(box.lower), points_per_dim=int(pool["points_per_dim"]))
    return PointPool(box.to_unit(pool["points"] if points is None else points))


def grid_point(spec: dict, index: int) -> list[float]:
    """Point ``index`` of a grid pool, in original units."""
    return to_original(spec, pool_of(spec).points([index])[0]).tolist()


def pool_index_of(spec: dict, pool: GridPool | PointPool, x: list[list[float]]) -> list[int | None]:
    """Pool index of each point that is (to rounding) a pool point, else None."""
    u = to_unit(spec, x)
    index = pool.index_of(u)
    hit = np.abs(pool.points(index) - u).max(axis=1) < 1e-9
    return [int(i) if h else None for i, h in zip(index, hit, strict=True)]
