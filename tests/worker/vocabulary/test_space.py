"""Input types (worker.vocabulary.space): values <-> pool coordinates <-> the GP's features, and
grids of typed inputs."""

import math

import numpy as np
import pytest

from fbgp_al.worker.vocabulary.design import Box, GridPool, initial_design
from fbgp_al.worker.vocabulary.space import Space

TYPED = [
    {"name": "a", "lower": -1.0, "upper": 3.0},
    {"name": "n", "type": "int", "lower": 2, "upper": 9},
    {"name": "rate", "type": "log", "lower": 1e-6, "upper": 1e-1},
    {"name": "material", "type": "choice", "values": ["steel", "al", 7]},
]


def test_plain_float_inputs_map_exactly_as_the_box_does():
    inputs = [{"name": "x1", "lower": -5, "upper": 10}, {"name": "x2", "lower": 0, "upper": 15}]
    space, box = Space.of(inputs), Box.of(inputs)
    x = np.random.default_rng(0).uniform([-5, 0], [10, 15], size=(50, 2))
    assert not space.typed
    assert np.array_equal(space.to_pool(x.tolist()), box.to_unit(x))
    assert np.array_equal(space.features(box.to_unit(x)), box.to_unit(x))
    u = np.random.default_rng(1).uniform(size=(20, 2))
    # the box's values, rounded to 15 significant digits (a grid level's shortest decimal)
    np.testing.assert_allclose(space.from_pool(u), box.from_unit(u), rtol=1e-14, atol=0)
    assert space.canonical([[1, 2]]) == [[1.0, 2.0]] and isinstance(
        space.canonical([[1, 2]])[0][0], float
    )
    assert space.axes(7) is None and space.grid_size(7) == 49


def test_values_round_trip_through_pool_coordinates():
    space = Space.of(TYPED)
    x = [[0.5, 3, 1e-3, "al"], [3.0, 9, 1e-6, 7], [-1.0, 2, 0.1, "steel"]]
    v = space.to_pool(x)
    assert v.shape == (3, 4) and (v >= 0).all() and (v <= 1).all()
    back = space.from_pool(v)
    assert [row[1] for row in back] == [3, 9, 2] and all(type(r[1]) is int for r in back)
    assert [row[3] for row in back] == ["al", 7, "steel"]
    assert [row[0] for row in back] == [0.5, 3.0, -1.0]
    np.testing.assert_allclose([row[2] for row in back], [1e-3, 1e-6, 0.1], rtol=1e-12)
    assert back[1][2] == 1e-6 and back[2][2] == 0.1  # the bounds exactly


def test_points_by_the_inputs_names_are_the_points_in_their_order():
    """A point may name its inputs (in any order, beside points as lists): the same codes;
    one that lacks an input or names one the campaign does not have is a ValueError that says
    which, not a coordinate read from a name."""
    space = Space.of(TYPED)
    listed = [[0.5, 3, 1e-3, "al"], [3.0, 9, 1e-6, 7]]
    named = [{"material": "al", "rate": 1e-3, "n": 3, "a": 0.5}, listed[1]]
    np.testing.assert_array_equal(space.codes(named), space.codes(listed))
    np.testing.assert_array_equal(space.to_gp(named), space.to_gp(listed))
    with pytest.raises(ValueError, match=r"point 0 lacks rate \(inputs: a, n, rate, material\)"):
        space.codes([{"a": 0.5, "n": 3, "material": "al"}])
    with pytest.raises(ValueError, match="point 1 names no input of the campaign: size"):
        space.codes([listed[0], {"a": 0.5, "n": 3, "rate": 1e-3, "material": "al", "size": 2}])


def test_log_inputs_are_spread_evenly_in_log_space():
    space = Space.of([TYPED[2]])
    v = space.to_pool([[1e-6], [1e-5], [1e-3], [1e-1]])[:, 0]
    np.testing.assert_allclose(v, [0.0, 0.2, 0.6, 1.0], atol=1e-15)
    # a grid of 6 levels holds the decades, as clean numbers
    assert space.from_pool(np.arange(6)[:, None] / 5) == [
        [1e-6],
        [1e-5],
        [1e-4],
        [1e-3],
        [1e-2],
        [1e-1],
    ]


def test_int_inputs_snap_to_integers():
    space = Space.of([TYPED[1]])
    v = np.array([[0.0], [0.3], [0.5], [0.99], [1.0]])
    # 2 + v * 7 = 2, 4.1, 5.5, 8.93, 9: nearest integers, halves up
    assert space.from_pool(v) == [[2], [4], [6], [9], [9]]
    np.testing.assert_allclose(space.snap(v)[:, 0], (np.array([2, 4, 6, 9, 9]) - 2) / 7)
    assert space.canonical([[3.0]]) == [[3]] and type(space.canonical([[3.0]])[0][0]) is int


def test_choice_inputs_are_one_hot_blocks_with_a_feature_each():
    space = Space.of(TYPED)
    assert space.dim == 4 and space.n_features == 6
    assert space.feature_names == ["a", "n", "rate", "material=steel", "material=al", "material=7"]
    assert space.one_hot.tolist() == [False, False, False, True, True, True]
    assert not Space.of(TYPED[:3]).one_hot.any()
    f = space.to_gp([[0.5, 3, 1e-3, "al"], [3.0, 9, 1e-6, 7.0]])
    assert f.shape == (2, 6)
    np.testing.assert_array_equal(f[:, 3:], [[0, 1, 0], [0, 0, 1]])
    np.testing.assert_allclose(
        f[:, :3], space.to_pool([[0.5, 3, 1e-3, "al"], [3.0, 9, 1e-6, 7]])[:, :3]
    )
    # 7.0 is the value 7; "7" is not
    assert space.canonical([[0.0, 2, 1e-2, 7.0]])[0][3] == 7
    with pytest.raises(ValueError, match="not one of its values"):
        space.codes([[0.0, 2, 1e-2, "7"]])


@pytest.mark.parametrize(
    ("point", "message"),
    [
        ([0.5, 3.5, 1e-3, "al"], "n = 3.5 is not an integer"),
        ([0.5, 10, 1e-3, "al"], "outside"),
        ([0.5, 3, 0.0, "al"], "rate = 0.0 is outside"),
        ([0.5, 3, 1e-3, "wood"], "material = 'wood' is not one of its values"),
        (["0.5", 3, 1e-3, "al"], "a = '0.5' is not a number"),
        ([math.inf, 3, 1e-3, "al"], "not a finite number"),
        ([0.5, 3, 1e-3], "has 3 coordinates"),
    ],
)
def test_values_that_are_not_the_inputs_are_refused_by_name(point, message):
    with pytest.raises(ValueError, match=message):
        Space.of(TYPED).codes([point])


def test_plain_float_points_refuse_text_even_if_it_reads_as_a_number():
    with pytest.raises(ValueError, match="not a number"):
        Space.of([{"name": "x", "lower": 0, "upper": 1}]).codes([["0.5"]])


def test_grids_of_typed_inputs_hold_each_point_once():
    space = Space.of(TYPED)
    # float, log: points_per_dim levels; int 2..9: at most its 8 integers; choice: its 3 values
    assert space.levels(5) == (5, 5, 5, 3) and space.levels(50) == (50, 8, 50, 3)
    pool = GridPool(dim=4, points_per_dim=5, axes=space.axes(5))
    assert pool.size == 5 * 5 * 5 * 3 == space.grid_size(5)
    every = pool.points(np.arange(pool.size))
    values = space.from_pool(every)
    assert len({tuple(row) for row in values}) == pool.size  # no duplicates after snapping
    assert {row[1] for row in values} == {2, 4, 6, 7, 9}  # 2 + j * 7 / 4, snapped
    assert {row[3] for row in values} == {"steel", "al", 7}
    # row-major flat index: the last input varies fastest; index_of finds each point again
    assert values[1][:3] == values[0][:3] and values[1][3] == "al"
    assert (
        values[3][3] == "steel" and values[3][2] > values[0][2] and values[3][:2] == values[0][:2]
    )
    np.testing.assert_array_equal(pool.index_of(space.to_pool(values)), np.arange(pool.size))
    # a point's pool coordinates are the snapped value's: the GP sees the integer it is labeled at
    np.testing.assert_allclose(every, space.to_pool(values), atol=1e-12)


def test_a_small_int_range_gives_every_integer_once():
    space = Space.of(
        [
            {"name": "k", "type": "int", "lower": 0, "upper": 3},
            {"name": "x", "lower": 0, "upper": 1},
        ]
    )
    pool = GridPool(dim=2, points_per_dim=10, axes=space.axes(10))
    assert pool.shape == (4, 10)
    values = space.from_pool(pool.points(np.arange(pool.size)))
    assert sorted({row[0] for row in values}) == [0, 1, 2, 3]
    assert len({tuple(r) for r in values}) == 40


def test_huge_typed_grids_are_never_materialized():
    inputs = [{"name": f"x{j}", "type": "log", "lower": 1e-3, "upper": 1.0} for j in range(8)]
    inputs.append({"name": "c", "type": "choice", "values": list("abcde")})
    space = Space.of(inputs)
    pool = GridPool(dim=9, points_per_dim=100, axes=space.axes(100))
    assert pool.size == 100**8 * 5
    index = pool.subsample(1000, np.random.default_rng(0))
    assert len(np.unique(index)) == 1000
    np.testing.assert_array_equal(pool.index_of(pool.points(index)), index)


def test_initial_design_snaps_to_distinct_typed_grid_points():
    space = Space.of(TYPED)
    pool = GridPool(dim=4, points_per_dim=20, axes=space.axes(20))
    design = initial_design(pool, 12, seed=3)
    assert len(set(design.tolist())) == 12
    values = space.from_pool(pool.points(design))
    assert all(type(row[1]) is int and row[3] in ("steel", "al", 7) for row in values)
    # the LHS spreads over the choice's values
    assert {row[3] for row in values} == {"steel", "al", 7}


def test_the_initial_design_gives_each_choice_value_its_share():
    """Snapped to the nearest level, a uniform coordinate would give a 4-valued choice's first
    and last values 1/6 of the points each; stratified, each value takes 2 of 8."""
    inputs = [
        {"name": "m", "type": "choice", "values": list("abcd")},
        {"name": "x", "lower": 0, "upper": 1},
    ]
    space = Space.of(inputs)
    pool = GridPool(dim=2, points_per_dim=40, axes=space.axes(40))
    for seed in range(5):
        design = initial_design(pool, 8, seed=seed, warp=space.stratify)
        values = [row[0] for row in space.from_pool(pool.points(design))]
        assert sorted(values) == list("aabbccdd"), (seed, values)
    int_space = Space.of([{"name": "n", "type": "int", "lower": 0, "upper": 3}])
    u = np.array([[0.0], [0.24], [0.26], [0.74], [0.76], [1.0]])
    assert int_space.from_pool(int_space.stratify(u)) == [[0], [0], [1], [2], [3], [3]]
    plain = Space.of([{"name": "x", "lower": 0, "upper": 1}])
    assert np.array_equal(plain.stratify(u), u)  # float inputs: the design as before


def test_transform_names_the_typed_inputs():
    t = Space.of(TYPED).transform()
    assert t["lower"] == [-1.0, 2.0, 1e-6, 0.0] and t["upper"] == [3.0, 9.0, 0.1, 2.0]
    assert t["inputs"][1] == {"name": "n", "type": "int", "lower": 2, "upper": 9}
    assert t["inputs"][3] == {"name": "material", "type": "choice", "values": ["steel", "al", 7]}
    assert "inputs" not in Space.of([TYPED[0]]).transform()


def test_stored_points_map_even_a_rounding_error_outside_their_bounds():
    """A grid point computed as ``lower + v * (upper - lower)`` may pass ``upper`` by an ulp:
    the refit maps its label all the same (only points a user sends are held to the bounds)."""
    space = Space.of([{"name": "x", "lower": 0.1, "upper": 0.7}, TYPED[1]])
    above = np.nextafter(0.7, 1.0)
    np.testing.assert_allclose(space.to_pool([[above, 9]]), [[1.0, 1.0]])
    with pytest.raises(ValueError, match="outside"):
        space.codes([[above, 9]])
