"""A campaign's pool and input scaling, from its spec, for the API (the geometry and the box
themselves are the torch-free :mod:`worker.design`'s). Inputs map to the unit cube by the
declared bounds: ``u = (x - lower) / (upper - lower)`` (CONTRACT.md)."""

from __future__ import annotations

import json
from functools import lru_cache

import numpy as np

from worker.design import Box, GridPool, PointPool


def to_unit(spec: dict, x) -> np.ndarray:
    """``x``: ``m x d`` in original units -> ``m x d`` in the unit cube."""
    return Box.of(spec["inputs"]).to_unit(x)


def to_original(spec: dict, u) -> np.ndarray:
    """The inverse of :func:`to_unit`."""
    return Box.of(spec["inputs"]).from_unit(u)


def pool_of(spec: dict) -> GridPool | PointPool:
    """The campaign's pool in the unit cube."""
    return _pool(json.dumps(spec["pool"], sort_keys=True), Box.of(spec["inputs"]))


@lru_cache(maxsize=64)
def _pool(pool_json: str, box: Box) -> GridPool | PointPool:
    pool = json.loads(pool_json)
    if pool["type"] == "grid":
        return GridPool(dim=len(box.lower), points_per_dim=int(pool["points_per_dim"]))
    return PointPool(box.to_unit(pool["points"]))


def pool_point(spec: dict, index: int) -> list[float]:
    """Pool point ``index`` in original units."""
    return to_original(spec, pool_of(spec).points([index])[0]).tolist()


def pool_index_of(spec: dict, x: list[list[float]]) -> list[int | None]:
    """Pool index of each point that is (to rounding) a pool point, else None."""
    pool = pool_of(spec)
    u = to_unit(spec, x)
    index = pool.index_of(u)
    hit = np.abs(pool.points(index) - u).max(axis=1) < 1e-9
    return [int(i) if h else None for i, h in zip(index, hit, strict=True)]
