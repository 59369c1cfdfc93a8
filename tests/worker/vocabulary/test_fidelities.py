"""A multi-fidelity campaign's levels as a point's last coordinate: split from and joined to the
declared points, counted and costed, and the nested initial design (each level's points a subset
of the level below's, every run at the level it was meant for, none twice)."""

import numpy as np
import pytest

from fbgp_al.worker.vocabulary import fidelities, pools
from fbgp_al.worker.vocabulary.fidelities import design_counts, nested_design

LEVELS = [{"name": "coarse", "cost": 1.0}, {"name": "fine", "cost": 10.0}]


def _spec(inputs=None, pool=None, levels=LEVELS) -> dict:
    body = {
        "inputs": inputs or [{"name": "x", "lower": 0.0, "upper": 2.0}],
        "pool": pool or {"type": "grid", "points_per_dim": 11},
        "fidelities": levels,
    }
    return fidelities.with_level(body)


def test_the_level_is_a_choice_coordinate_after_the_declared_inputs():
    spec = _spec()
    assert spec["inputs"][-1] == {
        "name": "fidelity",
        "type": "choice",
        "values": ["coarse", "fine"],
    }
    assert fidelities.declared_inputs(spec) == [{"name": "x", "lower": 0.0, "upper": 2.0}]
    x, names = fidelities.split(spec, [[0.2, "fine"], [1.0, "coarse"]])
    assert x == [[0.2], [1.0]] and names == ["fine", "coarse"]
    assert fidelities.join(x, names) == [[0.2, "fine"], [1.0, "coarse"]]
    assert fidelities.level_index(spec, names).tolist() == [1, 0]
    with pytest.raises(ValueError, match="unknown fidelity 'medium'"):
        fidelities.level_index(spec, ["medium"])
    single = {"inputs": [{"name": "x", "lower": 0.0, "upper": 2.0}]}
    assert fidelities.with_level(single) is single
    assert fidelities.split(single, [[0.2]]) == ([[0.2]], None)


def test_cost_and_counts_of_labels():
    spec = _spec()
    labels = [{"x": [0.1, "coarse"]}, {"x": [0.3, "coarse"]}, {"x": [0.5, "fine"]}]
    assert fidelities.spent(spec, labels) == 12.0
    assert fidelities.counts(spec, labels) == {"coarse": 2, "fine": 1}


@pytest.mark.parametrize(
    ("size", "levels", "expected"),
    [(4, 2, [2, 2]), (6, 2, [4, 2]), (9, 2, [6, 3]), (6, 3, [2, 2, 2]), (9, 3, [5, 2, 2])],
)
def test_design_counts_halve_up_the_levels_and_sum_to_the_size(size, levels, expected):
    counts = design_counts(size, levels)
    assert counts == expected and sum(counts) == size
    assert all(a >= b for a, b in zip(counts, counts[1:], strict=False))


def test_a_design_too_small_for_the_levels_is_refused():
    with pytest.raises(ValueError, match="needs 2 or more at each level"):
        design_counts(3, 2)


@pytest.mark.parametrize("kind", ["grid", "points"])
def test_the_nested_design_runs_the_top_levels_points_at_the_cheap_level_too(kind):
    if kind == "grid":
        spec = _spec(
            inputs=[
                {"name": "x", "lower": 0.0, "upper": 2.0},
                {"name": "k", "type": "int", "lower": 1, "upper": 5},
            ]
        )
    else:
        rng = np.random.default_rng(3)
        rows = [
            [float(a), float(b), lv] for a, b in rng.random((40, 2)) for lv in ("coarse", "fine")
        ]
        spec = _spec(
            inputs=[
                {"name": "x", "lower": 0.0, "upper": 1.0},
                {"name": "y", "lower": 0.0, "upper": 1.0},
            ],
            pool={"type": "points", "points": rows},
        )
    pool, space = pools.pool_of(spec), pools.space_of(spec)
    index = nested_design(pool, space, 9, 2, seed=5)
    assert len(set(index.tolist())) == 9
    points = pools.to_original(spec, pool.points(index))
    x, names = fidelities.split(spec, points)
    assert names == ["coarse"] * 6 + ["fine"] * 3
    assert x[6:] == x[:3]  # the top level's points are the first of the cheap level's
    assert len({tuple(p) for p in x[:6]}) == 6
    if kind == "grid":  # the expensive runs inside the box, none on its faces
        assert all(0.0 < p[0] < 2.0 for p in x[6:])
    again = nested_design(pool, space, 9, 2, seed=5)
    assert again.tolist() == index.tolist()
