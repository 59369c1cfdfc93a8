"""A campaign's known constraints as posted: each text parsed against the inputs
(:mod:`worker.vocabulary.constraints`), and the points of the pool they leave, counted (a grid's,
:class:`worker.vocabulary.feasible.FeasibleGrid`) or kept (an explicit pool's: those outside are
dropped). A constraint that does not parse or fit the inputs, or constraints that leave no
point, are a ValueError that says which, where and why."""

from __future__ import annotations

import unicodedata
from typing import Annotated

import numpy as np
from pydantic import AfterValidator, Field

from fbgp_al.worker.vocabulary import pools
from fbgp_al.worker.vocabulary.constraints import MAX_TEXT, ConstraintError, Constraints, pool_codes
from fbgp_al.worker.vocabulary.feasible import CHUNK, ENUMERATE, FRACTION_SAMPLE, FRACTION_SEED
from fbgp_al.worker.vocabulary.space import Space

MAX_CONSTRAINTS = 50


def _nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


# one constraint's text, in Unicode's NFKC form (as the inputs' names are stored)
ConstraintText = Annotated[str, Field(min_length=1, max_length=MAX_TEXT), AfterValidator(_nfkc)]


def feasible_pool(
    texts: list[str], space: Space, inputs: list[dict], pool: dict | None, points: list[list] | None
) -> tuple[int, list[list] | None, str]:
    """``(size, kept, how)``: the points of the pool inside every constraint (a grid's counted,
    or estimated from a seeded sample on a grid of more than 2^20 points), an explicit pool's
    ``points`` that are inside (None for a grid), and how the count was made (for messages).
    ValueError for a constraint that does not parse or fit, or for constraints that leave no
    point."""
    try:
        constraints = Constraints.of(texts, space)
    except ConstraintError as error:
        raise ValueError(str(error)) from None
    if points is not None:
        each = constraints.each(space.codes(points))
        keep = np.logical_and.reduce(each)
        if not keep.any():
            raise ValueError(_none_left(texts, [e.any() for e in each], "the pool's points"))
        return (
            int(keep.sum()),
            [p for p, k in zip(points, keep, strict=True) if k],
            " inside the constraints",
        )
    grid = pools.pool_of({"inputs": inputs, "pool": pool, "constraints": texts})
    listed = grid.total <= ENUMERATE
    if grid.sample_hits[0] == 0:
        if listed:
            index = np.arange(grid.total, dtype=np.int64)
            where = "the grid's points"
        else:
            rng = np.random.default_rng(FRACTION_SEED)
            index = rng.integers(0, grid.total, size=FRACTION_SAMPLE, dtype=np.int64)
            where = (
                f"{FRACTION_SAMPLE:,} of the grid's points drawn at random (a feasible part "
                f"under about 1 in {FRACTION_SAMPLE:,} of the grid is too small to draw "
                "candidates from: narrow the inputs' bounds instead)"
            )
        some = np.zeros(len(texts), dtype=bool)
        for start in range(0, len(index), CHUNK):
            codes = pool_codes(space, grid.points(index[start : start + CHUNK]))
            some |= np.array([e.any() for e in constraints.each(codes)])
        raise ValueError(_none_left(texts, some.tolist(), where))
    how = (
        " inside the constraints"
        if listed
        else f" inside the constraints, estimated from {FRACTION_SAMPLE:,} drawn"
    )
    return grid.size, None, how


def _none_left(texts: list[str], some: list[bool], where: str) -> str:
    """Which constraint leaves none of ``where`` (``some``: whether each alone leaves any)."""
    alone = next((k for k, s in enumerate(some) if not s), None)
    if alone is not None:
        return f"constraints[{alone}] {texts[alone]!r} leaves none of {where}"
    return f"the constraints together leave none of {where} (each alone leaves some)"
