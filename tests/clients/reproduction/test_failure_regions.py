"""``fbgp-al bench-failures`` (:mod:`clients.reproduction.failure_regions`): each failure region
covers the share of its domain asked, holds the steepest point found, and is the same every time
(seeded); a campaign's design ends with its last label; an arm's options; a repetition's noise
at a point is the same in every arm; a mixed campaign runs end to end."""

import numpy as np
import pytest

from fbgp_al.clients.reproduction.failure_cases import MixedBeam, pool_share
from fbgp_al.clients.reproduction.failure_regions import (
    brier,
    case_region,
    design_end,
    failures_option,
    noise_at,
    region,
    run_one,
    steepest,
)
from fbgp_al.clients.simulators import get_simulator


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
    grad = np.abs(
        sim.mean(sim.from_unit(np.clip(u[:500] + 1e-4, 0, 1))) - sim.mean(sim.from_unit(u[:500]))
    )
    at = np.abs(
        sim.mean(sim.from_unit(np.clip(where.centre + 1e-4, 0, 1))[None])
        - sim.mean(sim.from_unit(where.centre[None]))
    )
    assert (at >= np.median(grad)).all()


def test_the_design_ends_with_its_last_label_failed_design_runs_included():
    # a design of 3: runs 0 and 3 fail and are replaced; its third label is run 4
    failed = [True, False, False, True, False, True, False]
    assert design_end(failed, 3) == 5
    assert design_end(failed, 0) == 0
    assert design_end([False, False, False], 3) == 3
    assert design_end([True, False], 3) == 2  # it never ended: every run was the design's


def test_a_benchmark_model_names_its_campaign_s_failures_option():
    assert failures_option("none") == {"model": "none"}
    assert failures_option("classifier") == {"model": "classifier"}
    assert failures_option("classifier@0.3") == {"model": "classifier", "weight_quantile": 0.3}
    assert failures_option("classifier@bracket=0") == {"model": "classifier", "bracket": 0.0}
    assert failures_option("classifier@weight_quantile=0.2,bracket=0.1") == {
        "model": "classifier",
        "weight_quantile": 0.2,
        "bracket": 0.1,
    }
    for bad in ("forest", "none@0.3", "classifier@x", "classifier@min_success=0.2"):
        with pytest.raises(ValueError):
            failures_option(bad)


def test_a_repetition_s_noise_at_a_point_is_the_same_in_every_arm():
    """Common random numbers: the noise at a point depends on the repetition and the point only,
    not on the runs before it; another point or repetition draws another."""
    sim = get_simulator("branin")
    a, b = [0.25, 0.5], [0.5, 0.25]
    x = sim.from_unit(np.array([a]))
    first = sim.sample(x, noise_at(3, np.array(a)))
    assert sim.sample(x, noise_at(3, np.array(a)))[0] == first[0]
    assert sim.sample(x, noise_at(4, np.array(a)))[0] != first[0]
    assert sim.sample(x, noise_at(3, np.array(b)))[0] != first[0]
    draws = [sim.sample(x, noise_at(s, np.array(a)))[0] for s in range(400)]
    z = (np.asarray(draws) - sim.mean(x)[0]) / sim.noise_std(x)[0]
    assert abs(z.mean()) < 0.2 and 0.85 < z.std() < 1.15  # N(0, 1) over the repetitions


def test_the_brier_score_and_a_box_s_share_of_a_grid_by_hand():
    # P(success) 0.9 at a success, 0.2 at a failure, 1 at a success: (0.01 + 0.04 + 0) / 3
    assert brier([0.9, 0.2, 1.0], np.array([False, True, False])) == pytest.approx(0.05 / 3)
    assert brier(None, np.array([True])) is None
    # a box's share of a grid pool is counted per input: 2 of 5 levels x 3 of 5
    sim = MixedBeam()
    assert pool_share(sim, [0.0, 0.0, 0.0, 0.0], [0.15, 1.0, 1.0, 0.25]) == pytest.approx(
        2 / 11 * 3 / 11
    )


def test_a_mixed_campaign_reports_its_losses_and_brier_score(api_url):
    """The mixed case end to end against the service: its int and choice values go out and come
    back, and the record carries random sampling's loss and the failure model's Brier score."""
    sim, where = case_region("mixed")
    out = run_one(api_url, sim, where, "classifier", 8, 2, mcmc="fast", case="mixed")
    assert out["simulator"] == "mixed" and out["n_labeled"] == 8
    assert out["random_loss"] == pytest.approx(out["runs_after_design"] * where.fraction)
    # the design's runs: its labels and the runs of its points that failed
    assert out["runs"] == out["design_runs"] + out["runs_after_design"]
    assert out["design_runs"] - out["design"] == len(
        [i for i, _ in out["failed_at"] if i < out["design_runs"]]
    )
    # every run traced in order: its pool coordinates, and whether it failed as failed_at says
    assert len(out["runs_at"]) == out["runs"]
    assert [i for i, (_, failed) in enumerate(out["runs_at"]) if failed] == [
        i for i, _ in out["failed_at"]
    ]
    assert [out["runs_at"][i][0] for i, _ in out["failed_at"]] == [u for _, u in out["failed_at"]]
    # every label's coordinates, in order: the runs that did not fail
    assert out["labeled_at"] == [u for u, failed in out["runs_at"] if not failed]
    assert out["noise"] == "per point"
    if out["failed"]:
        assert 0.0 <= out["brier"] <= 1.0
    else:
        assert out["brier"] is None  # no run failed: no failure model, no probabilities
    assert np.isfinite(out["rmse_feasible"])
