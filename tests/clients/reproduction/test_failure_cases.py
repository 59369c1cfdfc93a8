"""The cases of ``fbgp-al bench-failures`` beyond the steepest box
(:mod:`clients.reproduction.failure_cases`): a region at a face and at a corner of the box,
each covering its share of the grid pool, counted point by point; the mixed-input beam (float,
int, choice, float), failing in its steepest corner, its deflection against the closed form."""

import math

import numpy as np
import pytest

from fbgp_al.clients.reproduction.failure_cases import MATERIALS
from fbgp_al.clients.reproduction.failure_regions import CASES, case_region


def _grid(k: int, d: int) -> np.ndarray:
    return np.stack(np.meshgrid(*[np.linspace(0, 1, k)] * d, indexing="ij"), -1).reshape(-1, d)


def test_a_face_and_a_corner_lie_on_the_box_and_cover_their_share_of_the_pool():
    sim, where = case_region("branin-face")
    # a slab across the input where the steepest point lies nearest a bound, all of the other
    j = int(np.argmin(np.minimum(where.centre, 1 - where.centre)))
    assert (where.lower[j], where.upper[j]) in ((0.0, 0.15), (0.85, 1.0))
    others = np.arange(2) != j
    assert (where.lower[others] == 0).all() and (where.upper[others] == 1).all()
    # its share of the 100 x 100 grid, counted point by point
    assert where.fraction == pytest.approx(where.contains(_grid(100, 2)).mean(), abs=1e-12)
    assert where.fraction == pytest.approx(0.15)
    sim, where = case_region("ishigami-corner")
    vertex = (where.centre >= 0.5).astype(float)  # the vertex nearest the steepest point
    assert where.contains(vertex[None])[0]
    assert np.prod(where.upper - where.lower) == pytest.approx(0.15)
    assert where.fraction == pytest.approx(where.contains(_grid(100, 3)).mean(), abs=1e-12)
    assert set(CASES) >= {"branin-face", "ishigami-corner", "mixed"}


def test_the_mixed_case_fails_in_its_steepest_corner_with_int_and_choice_inputs():
    sim, where = case_region("mixed")
    types = [i.get("type", "float") for i in sim.inputs()]
    assert types == ["float", "int", "choice", "float"]
    grid = sim.grid()
    assert len(grid) == 11 * 11 * 3 * 11
    # load >= 4.6, thickness <= 8, steel or aluminium, length >= 1.0: 7 x 7 x 2 x 6 points
    assert where.fraction == pytest.approx(7 * 7 * 2 * 6 / len(grid), abs=1e-12)
    assert where.contains(grid).mean() == pytest.approx(where.fraction, abs=1e-12)
    assert where.contains(np.array([[1.0, 0.0, 0.0, 1.0]]))[0]  # its corner: heavy, thin, long
    x = sim.from_unit(grid)
    np.testing.assert_allclose(sim.to_unit(x), grid, rtol=0, atol=1e-12)  # a round trip
    assert [x[0, 1], x[0, 2], x[-1, 1], x[-1, 2]] == [2, MATERIALS[0], 12, MATERIALS[-1]]
    inside, outside = sim.mean(x[where.contains(grid)]), sim.mean(x[~where.contains(grid)])
    assert inside.max() == sim.mean(x).max() and np.median(inside) > np.median(outside)
    # log10 of the deflection 4 F L^3 / (E t^3): F 10, L 1.5, E 70, t 2
    beam = sim.mean([[10.0, 2, "aluminium", 1.5]])[0]
    assert beam == pytest.approx(math.log10(4 * 10 * 3.375 / (70 * 8)), rel=1e-14)
