"""A record's labels refitted under other draws of their noise
(:mod:`clients.reproduction.failure_refit`): where a record's labels are read from, the refit's
RMSE against a noise-free fit of the same points, and the spread's draws."""

import numpy as np

from fbgp_al.clients.reproduction.failure_refit import (
    labeled_points,
    refit_rmse,
    spread,
    spread_table,
    with_spread,
)
from fbgp_al.clients.reproduction.failure_regions import feasible_test
from fbgp_al.clients.reproduction.failure_report import goals

GRID = np.round(np.linspace(0.16, 1.0, 22), 2)[:, None]  # gramacy1d's feasible ground


def _record(**changes) -> dict:
    runs = [[[0.0], True], *[[u.tolist(), False] for u in GRID]]
    record = {"simulator": "gramacy1d", "model": "classifier", "seed": 1, "runs": len(runs)}
    return {**record, "runs_at": runs, "rmse_feasible": 0.1, **changes}


def test_a_record_s_labels_are_its_runs_that_did_not_fail_or_none_when_cut():
    np.testing.assert_array_equal(labeled_points(_record()), GRID)
    assert labeled_points(_record(runs=500)) is None  # runs_at holds the first runs only
    kept = _record(runs=500, labeled_at=GRID[:3].tolist())
    np.testing.assert_array_equal(labeled_points(kept), GRID[:3])


def test_the_refit_of_noise_free_labels_is_near_the_function_and_noise_moves_it():
    """Every feasible grid point labeled: without noise the mean is near the function (the
    wiggles of period 0.1 resolved); with the simulator's noise (sd 0.1) it is not as near."""
    sim, test = feasible_test("gramacy1d", 1)
    every = np.round(np.arange(16, 101) / 100, 2)[:, None]
    x = sim.from_unit(every)
    clean = refit_rmse(sim, test, 1, every, sim.mean(x), mcmc="fast")
    noisy = refit_rmse(sim, test, 1, every, sim.sample(x, np.random.default_rng(0)), mcmc="fast")
    assert clean < 0.02 < noisy < 0.1


def test_the_spread_draws_other_noise_at_the_same_points_the_same_each_time():
    values = spread(_record(), feasible_test, draws=3, mcmc="fast")
    assert len(values) == 3 and len(set(values)) == 3 and all(np.isfinite(values))
    assert spread(_record(), feasible_test, draws=3, mcmc="fast") == values
    assert spread(_record(runs=500), feasible_test, draws=3) is None
    records = with_spread([_record(), _record(runs=500)], feasible_test, draws=2, mcmc="fast")
    assert len(records) == 1 and len(records[0]["rmse_noise"]) == 2  # the cut record left out
    table = spread_table(records)
    assert table.count("| gramacy1d | classifier | 1 |") == 1
    assert "gramacy1d: sd of the log RMSE" in table and "mean of 1 records" in table


def test_the_goals_read_the_labels_rmse_under_other_noise_against_none_s():
    """Two seeds, the classifier's labels' mean RMSE under other noise 0.8 and 0.9 of none's:
    their geometric mean, beside the final RMSE's ratio (1 and 1)."""
    records = [
        _record(seed=s, model=m, rmse_noise=[v, v], failed_after_design=1, random_loss=9.0)
        for s, (a, b) in enumerate([(0.8, 1.0), (0.9, 1.0)])
        for m, v in (("classifier", a), ("none", b))
    ]
    line = next(x for x in goals(records).splitlines() if "| classifier |" in x)
    assert f"| {np.sqrt(0.8 * 0.9):.3f} (" in line and "| 1.000 (" in line
