"""A pool that is the box (:mod:`worker.vocabulary.box`): its Sobol candidates seeded by the
campaign and the refit, inside the constraints, each int and choice value equally likely; its
initial design and reserve distinct, inside the constraints, and a 422's reason where they
leave no room."""

import numpy as np
import pytest
from scipy.stats import qmc

from fbgp_al.worker.vocabulary import box
from fbgp_al.worker.vocabulary.constraints import Constraints
from fbgp_al.worker.vocabulary.space import Space

SPACE = Space.of(
    [
        {"name": "a", "lower": 0, "upper": 1},
        {"name": "k", "type": "log", "lower": 0.01, "upper": 100},
        {"name": "m", "type": "choice", "values": ["x", "y", "z"]},
    ]
)


def test_candidates_are_a_seeded_scrambled_sobol_sample_of_the_box():
    first = box.candidates(SPACE, 1000, [3, 10])
    assert first.shape == (1000, 3) and (first >= 0).all() and (first <= 1).all()
    np.testing.assert_array_equal(first, box.candidates(SPACE, 1000, [3, 10]))
    assert not np.array_equal(first, box.candidates(SPACE, 1000, [3, 11]))  # the next refit's
    # the choice's values equally likely (a third each of 1,024 Sobol points, to a few)
    counts = np.bincount(np.rint(first[:, 2] * 2).astype(int), minlength=3)
    assert counts.min() >= 320
    # the float coordinates are a Sobol sample's: as uniform as one (low discrepancy)
    assert qmc.discrepancy(first[:, :2]) < 0.5 * qmc.discrepancy(
        np.random.default_rng(0).random((1000, 2))
    )


def test_candidates_keep_inside_the_constraints_drawing_more_as_needed():
    cut = Constraints.of(["a <= 0.1"], SPACE)
    points = box.candidates(SPACE, 500, [1, 5], cut)
    assert len(points) == 500 and (points[:, 0] <= 0.1 + 1e-12).all()


def test_the_design_and_reserve_are_distinct_and_inside():
    cut = Constraints.of(["a >= 0.5"], SPACE)
    points = box.design_points(SPACE, 6, 10, seed=4, constraints=cut)
    assert points.shape == (16, 3) and len({tuple(p) for p in points}) == 16
    assert (points[:, 0] >= 0.5).all()
    np.testing.assert_array_equal(points, box.design_points(SPACE, 6, 10, seed=4, constraints=cut))
    # the design spreads over the box: a maximin Latin hypercube snapped to the sample
    design = points[:6, :2]
    assert min(np.linalg.norm(p - q) for i, p in enumerate(design) for q in design[i + 1 :]) > 0.1


def test_constraints_that_leave_no_room_for_the_design_say_so():
    with pytest.raises(ValueError, match="fewer than the initial design"):
        box.design_points(SPACE, 3, 0, seed=0, constraints=Constraints.of(["a < 0"], SPACE))
