"""The paper's protocol as data, and the seeded per-run setup shared across acquisitions."""

import numpy as np
import pytest

from clients.reproduction import protocol
from clients.reproduction.protocol import campaign_body, grid_pool, pool_points, run_seed, run_setup
from clients.reproduction.rdauc import load_paper_table
from clients.simulators import SIMULATORS, get_simulator
from worker.spec import defaults


def test_constants_match_the_paper():
    paper = load_paper_table()
    assert paper["iterations"] == protocol.ITERATIONS
    assert set(protocol.ITERATIONS) == set(SIMULATORS)
    assert defaults.INITIAL_DESIGN_SIZE == paper["initial_points"] == 3
    assert defaults.POOL_SUBSAMPLE == 10_000
    assert protocol.TEST_SIZE == 1_000
    assert protocol.RUNS == 10
    assert defaults.BASELINE == "alm"
    assert set(defaults.PAPER_ACQUISITIONS) == set(paper["nlml"]) == set(paper["rmse"])


def test_run_seed_is_stable_and_distinct():
    # pinned: changing the derivation would silently change every benchmark's data
    assert run_seed("branin", 0) == 2503123594
    seeds = {run_seed(s, r) for s in SIMULATORS for r in range(10)}
    assert len(seeds) == 70
    assert run_seed("branin", 0, base_seed=1) != run_seed("branin", 0)


@pytest.mark.parametrize("name", ["gramacy1d", "branin", "ishigami", "hartmann6", "motorcycle"])
def test_run_setup_shapes_and_grid(name):
    sim = get_simulator(name)
    s = run_setup(name, 2)
    d = sim.dim
    assert s.seed == run_seed(name, 2)
    assert s.max_labels == 3 + protocol.ITERATIONS[name]
    assert s.initial_x.shape == (3, d) and s.initial_y.shape == (3,)
    assert len(set(s.initial_index.tolist())) == 3
    # snapped to the pool: the unit-cube image of each point is the grid point of its index
    np.testing.assert_array_equal(
        grid_pool(sim).index_of(sim.to_unit(s.initial_x)), s.initial_index
    )
    assert s.test_x.shape == (1000, d) and s.test_y.shape == (1000,)
    n_rmse = min(sim.pool_size, 10_000)
    assert s.rmse_x.shape == (n_rmse, d)
    np.testing.assert_array_equal(s.rmse_mean, sim.mean(s.rmse_x))
    if sim.pool_size > 1000:
        assert len(np.unique(s.test_x, axis=0)) == 1000
    if sim.pool_size <= 10_000:
        # the whole pool, in pool order
        np.testing.assert_allclose(s.rmse_x, pool_points(sim, np.arange(sim.pool_size)))
    else:
        assert len(np.unique(s.rmse_x, axis=0)) == 10_000
    # test labels are noisy: residuals have the simulator's noise sd
    resid = (s.test_y - sim.mean(s.test_x)) / sim.noise_std(s.test_x)
    assert resid.std() == pytest.approx(1, abs=0.1)


def test_run_setup_is_deterministic_per_run():
    a, b, c = run_setup("gramacy2d", 0), run_setup("gramacy2d", 0), run_setup("gramacy2d", 1)
    for field in ("initial_index", "initial_y", "test_x", "test_y", "rmse_x"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert not np.array_equal(a.initial_index, c.initial_index)
    assert not np.array_equal(a.test_x, c.test_x)


def test_campaign_body():
    body = campaign_body("branin", "qb-mgp", 3)
    assert body["inputs"] == [
        {"name": "x1", "lower": -5.0, "upper": 10.0},
        {"name": "x2", "lower": 0.0, "upper": 15.0},
    ]
    assert body["pool"] == {"type": "grid", "points_per_dim": 100}
    assert body["pool_subsample"] == 10_000
    assert body["acquisition"] == "qb-mgp"
    assert body["initial_design"] == {"type": "maximin-lhs", "size": 3}
    assert body["max_labels"] == 43
    assert body["seed"] == run_setup("branin", 3).seed
    assert body["mode"] == "sequential"
