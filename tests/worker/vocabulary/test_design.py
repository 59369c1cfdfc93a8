"""The input box, pools of candidate inputs and the initial design
(:mod:`worker.vocabulary.design`)."""

import numpy as np
import pytest
from scipy.spatial.distance import pdist
from scipy.stats import qmc

from fbgp_al.worker.vocabulary.design import Box, GridPool, PointPool, initial_design, maximin_lhs


def test_grid_pool_addresses_points_without_building_them():
    pool = GridPool(dim=6, points_per_dim=100)
    assert pool.size == 100**6
    pts = pool.points([0, 1, 100, pool.size - 1])
    assert np.allclose(pts[0], 0) and np.allclose(pts[-1], 1)
    assert np.isclose(pts[1, -1], 1 / 99) and np.isclose(pts[2, -2], 1 / 99)
    assert np.array_equal(pool.index_of(pts), [0, 1, 100, pool.size - 1])


def test_subsample_is_distinct_seeded_and_excludes():
    pool = GridPool(dim=6, points_per_dim=100)
    a = pool.subsample(10_000, np.random.default_rng(0), exclude=[0, 5])
    assert len(np.unique(a)) == 10_000 and not np.isin([0, 5], a).any()
    assert np.array_equal(a, pool.subsample(10_000, np.random.default_rng(0), exclude=[0, 5]))
    small = GridPool(dim=1, points_per_dim=11)
    everything_else = small.subsample(100, np.random.default_rng(1), exclude=[3])
    assert sorted(everything_else) == [i for i in range(11) if i != 3]


def test_maximin_lhs_is_a_latin_hypercube_and_beats_a_random_one():
    x = maximin_lhs(8, 3, seed=2)
    # one point in each of the 8 strata of every dimension
    for j in range(3):
        assert sorted(np.floor(x[:, j] * 8).astype(int)) == list(range(8))
    random_lhs = qmc.LatinHypercube(d=3, rng=np.random.default_rng(2)).random(8)
    assert pdist(x).min() >= pdist(random_lhs).min()
    assert np.array_equal(x, maximin_lhs(8, 3, seed=2))


def test_initial_design_snaps_to_distinct_pool_points():
    pool = GridPool(dim=1, points_per_dim=3)
    design = initial_design(pool, 3, seed=0)
    assert sorted(design) == [0, 1, 2]  # every point of a 3-point pool, none twice
    points = PointPool(np.array([[0.0, 0.0], [0.1, 0.1], [0.9, 0.9], [0.5, 0.2]]))
    design = initial_design(points, 3, seed=1)
    assert len(set(design.tolist())) == 3
    with pytest.raises(ValueError):
        initial_design(points, 5, seed=1)


def test_bad_pools_are_rejected():
    with pytest.raises(ValueError):
        GridPool(dim=0, points_per_dim=10)
    with pytest.raises(ValueError):
        PointPool(np.empty((0, 2)))


def test_a_point_pool_finds_nearest_points_by_tree_as_by_scan(monkeypatch):
    """Many rows over a large pool go through a k-d tree built once: the same indices as the
    scan, and the initial design that snaps to the pool is the same either way."""
    from fbgp_al.worker.vocabulary import design

    rng = np.random.default_rng(3)
    pool = PointPool(rng.random((5_000, 3)))
    rows = np.vstack([rng.random((200, 3)), pool.points([7, 4_999, 0])])  # 3 exact hits
    scanned = pool.index_of(rows)
    assert len(rows) * pool.size <= design.BRUTE_FORCE_PAIRS  # the scan above
    snapped = initial_design(pool, 40, seed=2)
    monkeypatch.setattr(design, "BRUTE_FORCE_PAIRS", 0)
    np.testing.assert_array_equal(pool.index_of(rows), scanned)
    assert scanned[-3:].tolist() == [7, 4_999, 0]
    np.testing.assert_array_equal(initial_design(pool, 40, seed=2), snapped)


def test_a_large_maximin_design_tries_fewer_hypercubes():
    """Small designs search 1,000 hypercubes; a large one as many as LHS_WORK allows (at least
    10), and is still the best of those it tried: the same as asking for that many."""
    from fbgp_al.worker.vocabulary import design

    assert np.array_equal(maximin_lhs(3, 6, seed=4), maximin_lhs(3, 6, seed=4, tries=1000))
    size, dim = 200, 50
    tries = design.LHS_WORK // (size * size * dim)
    assert design.LHS_TRIES[0] <= tries < design.LHS_TRIES[1]
    x = maximin_lhs(size, dim, seed=4)
    assert np.array_equal(x, maximin_lhs(size, dim, seed=4, tries=tries))
    assert not np.array_equal(x, maximin_lhs(size, dim, seed=4, tries=1000))


def test_inputs_map_to_unit_cube_by_declared_bounds_and_back():
    box = Box.of([{"lower": -5, "upper": 10}, {"lower": 0, "upper": 15}])
    x = [[-5.0, 0.0], [10.0, 15.0], [2.5, 7.5]]
    u = box.to_unit(x)
    assert np.array_equal(u, [[0.0, 0.0], [1.0, 1.0], [0.5, 0.5]])
    assert np.allclose(box.from_unit(u), x)
    assert u.dtype == np.float64


@pytest.mark.parametrize("lower,upper", [((0.0,), (0.0,)), ((1.0, 0.0), (0.0, 1.0)), ((), ())])
def test_bad_bounds_are_rejected(lower, upper):
    with pytest.raises(ValueError):
        Box(lower=lower, upper=upper)
