"""A grid pool cut by constraints (:class:`worker.vocabulary.feasible.FeasibleGrid`), as
:func:`worker.vocabulary.pools.pool_of` gives it to every caller: its design, its draws and its
nearest-point look-ups are feasible, its draws cover the feasible part uniformly (on a listed
30^3 grid and on a 100^6 grid drawn from by rejection), its work is bounded where the feasible
part is small, and a campaign stored without constraints gets the plain grid."""

import math
import time

import numpy as np
import pytest

from fbgp_al.service.store.campaigns import design_reserve
from fbgp_al.worker.vocabulary import feasible, pools
from fbgp_al.worker.vocabulary.design import GridPool, initial_design
from fbgp_al.worker.vocabulary.feasible import FeasibleGrid

CUBE3 = [{"name": n, "lower": 0.0, "upper": 1.0} for n in ("x", "y", "z")]
CUBE6 = [{"name": f"x{i}", "lower": 0.0, "upper": 1.0} for i in range(6)]
# infeasible: the corner x + y > 1 below z = 0.5 (a quarter of the box, to rounding)
CORNER3 = "x + y <= 1 or z >= 0.5"
CORNER6 = "x0 + x1 <= 1 or x2 >= 0.5"


def spec(inputs, per_dim: int, constraints) -> dict:
    body = {"inputs": inputs, "pool": {"type": "grid", "points_per_dim": per_dim}}
    return body if constraints is None else dict(body, constraints=constraints)


def exact_share(k: int) -> tuple[float, float]:
    """On a grid of ``k`` levels: the feasible share of ``CORNER*`` and the share of the
    feasible points with z >= 0.5 (levels i/(k-1): i + j <= k - 1, or l >= (k - 1) / 2)."""
    i, j, lev = np.meshgrid(np.arange(k), np.arange(k), np.arange(k), indexing="ij")
    upper = 2 * lev >= k - 1
    ok = (i + j <= k - 1) | upper
    return ok.mean(), upper.sum() / ok.sum()


def test_a_grid_without_constraints_is_the_plain_grid():
    """A campaign stored before constraints existed (no key) or without any gets today's pool."""
    for constraints in (None, []):
        assert type(pools.pool_of(spec(CUBE3, 30, constraints))) is GridPool


@pytest.mark.parametrize("inputs, k, text", [(CUBE3, 30, CORNER3), (CUBE6, 100, CORNER6)])
def test_design_draws_and_look_ups_are_feasible_and_cover_the_feasible_part(inputs, k, text):
    s = spec(inputs, k, [text])
    pool = pools.pool_of(s)
    assert isinstance(pool, FeasibleGrid) and pool.total == k ** len(inputs)
    assert pool.listed is not None if k == 30 else pool.listed is None
    share, upper = exact_share(k)
    hits, drawn = pool.sample_hits
    assert abs(pool.fraction - share) < 4 * math.sqrt(share * (1 - share) / drawn) + 1e-12
    if k == 30:
        assert pool.size == round(share * pool.total)  # counted exactly
    design = initial_design(pool, 20, seed=3, warp=pools.space_of(s).stratify)
    assert len(set(design.tolist())) == 20 and pool.feasible(design).all()
    reserve = design_reserve(pool, design.tolist(), seed=3)
    assert len(reserve) == 32 and pool.feasible(reserve).all()
    assert not set(reserve) & set(design.tolist())
    draws = pool.subsample(4000, np.random.default_rng(7), exclude=design)
    assert len(draws) == 4000 and len(set(draws.tolist())) == 4000
    assert pool.feasible(draws).all() and not set(draws.tolist()) & set(design.tolist())
    # uniform over the feasible part: the sub-box z >= 0.5 (all feasible) holds its share
    in_upper = (pool.points(draws)[:, 2] >= 0.5 - 1e-12).mean()
    assert abs(in_upper - upper) < 4 * math.sqrt(upper * (1 - upper) / 4000)
    # and the infeasible corner is what the plain grid's draws would have hit
    plain = GridPool(len(inputs), k).subsample(4000, np.random.default_rng(7))
    assert not pool.feasible(plain).all()
    # a look-up in the corner answers a feasible point; outside it, the nearest grid point
    corner = np.tile([0.9, 0.9, 0.1] + [0.5] * (len(inputs) - 3), (5, 1))
    corner[:, 3:] = np.linspace(0, 1, 5)[:, None] if len(inputs) > 3 else corner[:, 3:]
    near = pool.index_of(corner)
    assert pool.feasible(near).all()
    inside = np.array([[0.2, 0.3, 0.1] + [0.5] * (len(inputs) - 3)])
    assert pool.index_of(inside).tolist() == GridPool(len(inputs), k).index_of(inside).tolist()


def test_the_nearest_feasible_point_of_a_listed_grid_is_the_nearest():
    pool = pools.pool_of(spec(CUBE3, 30, [CORNER3]))
    rows = np.random.default_rng(0).uniform(size=(50, 3))
    got = pool.index_of(rows)
    every = pool.listed
    points = pool.points(every)
    for row, index in zip(rows, got, strict=True):
        best = np.min(((points - row) ** 2).sum(1))
        assert np.isclose(((pool.points([index])[0] - row) ** 2).sum(), best)


def test_the_pattern_search_of_a_large_grid_ends_near_the_boundary():
    """On 100^6, a point deep in the corner snaps to a feasible point by the boundary
    x0 + x1 = 1 (the nearest is at distance sqrt(2) * 0.4 from (0.9, 0.9))."""
    pool = pools.pool_of(spec(CUBE6, 100, [CORNER6]))
    row = np.array([[0.9, 0.9, 0.1, 0.5, 0.5, 0.5]])
    point = pool.points(pool.index_of(row))[0]
    assert pool.feasible(pool.index_of(row)).all()
    assert np.linalg.norm(point - row[0]) < math.sqrt(2) * 0.4 + 0.05


def test_typed_inputs_and_a_choice_condition():
    inputs = [
        {"name": "load", "lower": 1.0, "upper": 10.0},
        {"name": "thickness", "type": "int", "lower": 2, "upper": 20},
        {"name": "material", "type": "choice", "values": ["steel", "al", "ti"]},
    ]
    s = spec(inputs, 30, ["thickness >= 4 or load <= 8", "material != 'al' or load <= 5"])
    pool = pools.pool_of(s)
    space = pools.space_of(s)
    design = initial_design(pool, 12, seed=0, warp=space.stratify)
    draws = pool.subsample(1000, np.random.default_rng(1))
    for x in space.from_pool(pool.points(np.concatenate([design, draws]))):
        load, thickness, material = x
        assert thickness >= 4 or load <= 8
        assert material != "al" or load <= 5


def test_an_imported_point_outside_the_constraints_has_no_pool_index():
    s = spec(CUBE3, 11, [CORNER3])
    pool = pools.pool_of(s)
    assert pools.pool_index_of(s, pool, [[0.9, 0.9, 0.1], [0.2, 0.3, 0.1], [0.25, 0.3, 0.1]]) == [
        None,
        GridPool(3, 11).index_of([[0.2, 0.3, 0.1]])[0],
        None,
    ]


def test_draws_are_the_same_bits_for_the_same_seed():
    a = pools.pool_of(spec(CUBE6, 100, [CORNER6])).subsample(500, np.random.default_rng(5))
    b = pools.pool_of(spec(CUBE6, 100, [CORNER6])).subsample(500, np.random.default_rng(5))
    assert a.tolist() == b.tolist()


def test_a_small_feasible_part_bounds_the_draws(monkeypatch):
    """A feasible part of 1.2e-4 of 100^6: the draws stop at ``MAX_DRAWS``, feasible
    all, fewer than asked for (about MAX_DRAWS x the fraction)."""
    monkeypatch.setattr(feasible, "MAX_DRAWS", 2**20)
    pool = pools.pool_of(spec(CUBE6, 100, ["x0 <= 0.02 and x1 <= 0.02 and x2 <= 0.3"]))
    fraction = 2 * 2 * 30 / 100**3  # levels i / 99: two of x0 and of x1, 30 of x2
    assert 0 < pool.sample_hits[0] < 60 and pool.fraction < 10 * fraction
    start = time.perf_counter()
    draws = pool.subsample(10_000, np.random.default_rng(0))
    assert time.perf_counter() - start < 20
    assert pool.feasible(draws).all()
    assert 0.5 * 2**20 * fraction < len(draws) < 2 * 2**20 * fraction
    design = initial_design(pool, 5, seed=0)
    assert pool.feasible(design).all()


def test_a_design_crowded_on_a_small_feasible_part_of_a_large_grid_draws_once(monkeypatch):
    """300 design points on about 1,200 feasible points of a grid of 130^3 (not listed): most
    snap to the same edge and move to a free point near it, each from one draw of feasible
    points made once (a draw of its own for each took minutes): the grid is drawn from by
    rejection once, not once per point."""
    s = spec(CUBE3, 130, ["x <= 0.02 and y <= 0.02"])
    pool = pools.pool_of(s)
    assert pool.listed is None
    rounds = []
    rejected = feasible.FeasibleGrid._rejected
    monkeypatch.setattr(
        feasible.FeasibleGrid,
        "_rejected",
        lambda self, *a: rounds.append(a[0]) or rejected(self, *a),
    )
    design = initial_design(pool, 300, seed=0)
    assert len(set(design.tolist())) == 300 and pool.feasible(design).all()
    assert len(rounds) == 1, rounds
