"""A campaign's pool and input scaling from its spec (:mod:`worker.vocabulary.pools`): values to the
unit cube and back, an explicit pool kept apart from the spec (its count in the spec), the grid's
points as values, and the pool index of points that are pool points."""

import numpy as np

from fbgp_al.worker.vocabulary.pools import (
    explicit,
    grid_point,
    pool_index_of,
    pool_of,
    stored_pool,
    to_original,
    to_unit,
    with_box_design,
)

INPUTS = [
    {"name": "load", "lower": 2.0, "upper": 4.0},
    {"name": "mesh", "type": "int", "lower": 1, "upper": 5},
    {"name": "alloy", "type": "choice", "values": ["steel", "alu", "ti"]},
]
GRID = {"inputs": INPUTS, "pool": {"type": "grid", "points_per_dim": 5}}
POINTS = [[2.0, 1, "steel"], [3.5, 4, "ti"], [4.0, 5, "alu"]]


def test_values_map_to_the_unit_cube_by_the_bounds_and_back():
    u = to_unit(GRID, [[2.0, 1, "steel"], [3.0, 3, "alu"], [4.0, 5, "ti"]])
    np.testing.assert_allclose(u, [[0.0, 0.0, 0.0], [0.5, 0.5, 0.5], [1.0, 1.0, 1.0]])
    assert to_original(GRID, u) == [[2.0, 1, "steel"], [3.0, 3, "alu"], [4.0, 5, "ti"]]
    # snapped to each input's nearest value
    assert to_original(GRID, [[0.26, 0.3, 0.8]]) == [[2.52, 2, "ti"]]


def test_an_explicit_pool_is_kept_by_its_count_and_its_points_are_pool_points():
    spec = {"inputs": INPUTS, "pool": {"type": "points", "points": POINTS}}
    assert explicit(spec) and not explicit(GRID)
    assert stored_pool(spec["pool"]) == {"type": "points", "size": 3}
    assert stored_pool(GRID["pool"]) == GRID["pool"]
    pool = pool_of(spec)
    assert pool.size == 3
    assert pool_index_of(spec, pool, [[4.0, 5, "alu"], [3.0, 4, "ti"], POINTS[0]]) == [2, None, 0]


def test_a_grid_pools_points_are_its_inputs_levels():
    pool = pool_of(GRID)
    assert pool.size == 5 * 5 * 3  # an int of 5 values, a choice of 3: each value once
    points = [grid_point(GRID, i) for i in range(pool.size)]
    assert len({tuple(p) for p in points}) == pool.size
    assert points[0] == [2.0, 1, "steel"] and points[-1] == [4.0, 5, "ti"]
    assert pool_index_of(GRID, pool, points[7:9]) == [7, 8]


def test_a_continuous_pool_stores_its_design_and_reserve_as_points():
    spec = {
        "inputs": [{"name": "a", "lower": 2.0, "upper": 4.0}],
        "pool": {"type": "continuous"},
        "initial_design": {"size": 3},
        "seed": 5,
    }
    made = with_box_design(spec, 4)
    assert explicit(made) and len(made["pool"]["points"]) == 7
    assert stored_pool(made["pool"]) == {"type": "continuous", "size": 7}
    assert all(2.0 <= p[0] <= 4.0 for p in made["pool"]["points"])
    assert pool_of(made).size == 7
    grid = {"pool": {"type": "grid", "points_per_dim": 5}}
    assert with_box_design(grid, 4) is grid and not explicit(grid)
