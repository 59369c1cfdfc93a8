"""A pool that is the box (``"pool": {"type": "continuous"}``; numpy and scipy only, the API
uses it too): no stored candidates; each refit scores a fresh scrambled Sobol sample of the box
(:func:`candidates`), seeded by the campaign's seed and the refit's number of labels, each int
and choice input's values equally likely (:meth:`worker.vocabulary.space.Space.stratify`) and
none outside the campaign's constraints.

Its initial design and reserve (:func:`design_points`) are a maximin Latin hypercube snapped to
such a sample drawn from the seed alone: they are stored as an explicit pool's points are, and
handed out by index as a pool's design is (:mod:`worker.vocabulary.pools`); every point after
them is a point off that pool (:mod:`worker.fitting.search`).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy.stats import qmc

from fbgp_al.worker.vocabulary.constraints import Constraints
from fbgp_al.worker.vocabulary.design import PointPool, initial_design
from fbgp_al.worker.vocabulary.space import Space

# a sample cut by constraints is drawn again, twice as large, until it holds the points asked
# for, up to this many points drawn (then it holds those inside, maybe fewer)
MOST_DRAWN = 1 << 22
DESIGN_SAMPLE = 4096  # the Sobol points an initial design snaps to
ACCURACY_KEY = 2**32  # the accuracy estimates' sample: the same for every model
DESIGN_KEY = 2**32 + 1


def continuous(spec: dict) -> bool:
    """Whether the campaign's pool is the box."""
    return spec["pool"]["type"] == "continuous"


def candidates(space: Space, size: int, seed, constraints: Constraints | None = None) -> np.ndarray:
    """``size`` points of the box (pool coordinates, ``size x d``): the first of a scrambled
    Sobol sequence seeded by ``seed`` (an int or a list of them, as
    ``numpy.random.default_rng`` takes it) drawn in a power of two, stratified for int and
    choice inputs, those outside ``constraints`` left out (fewer where the constraints leave
    fewer than ``size`` of ``MOST_DRAWN``)."""
    drawn = 1 << max(0, math.ceil(math.log2(max(1, size))))
    while True:
        sobol = qmc.Sobol(d=space.dim, scramble=True, rng=np.random.default_rng(seed))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # a power of two: balanced
            points = space.stratify(sobol.random(drawn))
        if constraints is not None:
            points = points[constraints.holds_at(points)]
        if len(points) >= size or drawn >= MOST_DRAWN:
            return points[:size]
        drawn *= 2


def design_points(
    space: Space, size: int, reserve: int, seed: int, constraints: Constraints | None = None
) -> np.ndarray:
    """An initial design of ``size`` points then ``reserve`` more (pool coordinates): a
    maximin Latin hypercube (stratified) snapped to ``DESIGN_SAMPLE`` points of the box
    (:func:`candidates`, from ``seed`` alone), then a seeded draw of the others. ValueError
    when the constraints leave fewer than ``size`` of them."""
    sample = candidates(space, DESIGN_SAMPLE, [int(seed), DESIGN_KEY], constraints)
    if len(sample) < size:
        raise ValueError(
            f"the constraints leave {len(sample)} of {MOST_DRAWN:,} points of the box, fewer "
            f"than the initial design ({size})"
        )
    pool = PointPool(sample)
    design = initial_design(pool, size, seed, warp=space.stratify)
    rest = np.setdiff1d(np.arange(len(sample)), design)
    rng = np.random.default_rng([int(seed), 1])
    spare = rng.permutation(rest)[:reserve]
    return sample[np.r_[design, spare].astype(np.int64)]
