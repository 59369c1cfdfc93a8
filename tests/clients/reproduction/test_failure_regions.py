"""The failure regions of ``fbgp-al bench-failures`` (:mod:`clients.reproduction.failure_regions`):
each covers the share of its domain asked, holds the steepest point found, and is the same
every time (seeded)."""

import numpy as np
import pytest

from clients.reproduction.failure_regions import region, steepest, table
from clients.simulators import get_simulator


@pytest.mark.parametrize("name", ["gramacy1d", "branin", "ishigami", "hartmann6"])
def test_a_region_covers_its_share_around_the_steepest_point(name):
    sim = get_simulator(name)
    where = region(sim, 0.15)
    assert 0.05 <= where.fraction <= 0.30 and abs(where.fraction - 0.15) < 0.01
    assert where.contains(where.centre[None])[0]
    u = np.random.default_rng(5).random((20_000, sim.dim))
    assert abs(where.contains(u).mean() - where.fraction) < 0.01
    assert np.array_equal(steepest(sim), where.centre)  # seeded
    # steeper there than at most points of the domain
    grad = np.abs(sim.mean(sim.from_unit(np.clip(u[:500] + 1e-4, 0, 1)))
                  - sim.mean(sim.from_unit(u[:500])))  # fmt: skip
    at = np.abs(sim.mean(sim.from_unit(np.clip(where.centre + 1e-4, 0, 1))[None])
                - sim.mean(sim.from_unit(where.centre[None])))  # fmt: skip
    assert (at >= np.median(grad)).all()


def test_the_table_pools_and_takes_medians():
    records = [{"simulator": "branin", "model": m, "seed": s, "runs": 20, "failed": f,
                "runs_after_design": 17, "failed_after_design": f, "rmse_feasible": 1.0 + s,
                "region_fraction": 0.15}
               for m, f in (("none", 5), ("classifier", 1)) for s in (0, 1)]  # fmt: skip
    text = table(records)
    assert "| branin | 15% | classifier | 2 | 2/40 | 5.9% | 1.5 |" in text
    assert "| branin | 15% | none | 2 | 10/40 | 29.4% | 1.5 |" in text
