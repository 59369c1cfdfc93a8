"""``fbgp-al bench-failures`` (:mod:`clients.reproduction.failure_regions`): each failure region
covers the share of its domain asked, holds the steepest point found, and is the same every time
(seeded); the area under a campaign's feasible RMSE curve carries a missing version's value
forward, and the RD-AUC of the classifier's areas against none's is Algorithm 1's."""

import numpy as np
import pytest

from fbgp_al.clients.reproduction.failure_cases import MixedBeam, pool_share
from fbgp_al.clients.reproduction.failure_regions import (
    brier,
    case_region,
    curve_auc,
    design_end,
    failures_option,
    random_loss,
    rd_auc_by_simulator,
    region,
    run_one,
    steepest,
    table,
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


def record(model, seed, curve, design=3, labels=5, failed=1, rmse=1.0):
    return {
        "simulator": "branin",
        "model": model,
        "seed": seed,
        "runs": 20,
        "failed": failed,
        "runs_after_design": 17,
        "failed_after_design": failed,
        "rmse_feasible": rmse,
        "region_fraction": 0.15,
        "design": design,
        "labels": labels,
        "rmse_curve": curve,
    }


def test_a_missing_version_carries_the_last_value_forward():
    # versions 3, 4 and 6 of labels 3..6: 5's is 4's; trapezoids of unit width
    r = record("none", 0, [[3, 1.0], [4, 0.5], [6, 0.25]], labels=6)
    assert curve_auc(r) == pytest.approx((1.0 + 0.5) / 2 + (0.5 + 0.5) / 2 + (0.5 + 0.25) / 2)
    # a campaign that stalled at 5 labels: its last value runs on to the last label (7)
    r = record("none", 0, [[3, 2.0], [5, 1.0]], labels=7)
    assert curve_auc(r) == pytest.approx(2.0 + 1.5 + 1.0 + 1.0)
    # versions before the design's end are left out; the one at it is taken from the latest
    r = record("none", 0, [[2, 9.0], [4, 1.0]], design=3, labels=4)
    assert curve_auc(r) == pytest.approx((9.0 + 1.0) / 2)
    assert np.isnan(curve_auc(record("none", 0, [[4, 1.0]], design=3, labels=4)))


def test_the_rd_auc_of_the_classifier_against_none():
    # constant curves over labels 3..5: an area of twice the value
    records = [
        record("none", 0, [[3, 2.0], [5, 2.0]]),
        record("none", 1, [[3, 3.0]]),
        record("classifier", 0, [[3, 1.0], [4, 1.0]]),
        record("classifier", 1, [[3, 1.5]]),
        record("none", 2, [[3, 100.0]]),
    ]  # no classifier run of seed 2
    rd = rd_auc_by_simulator(records)["branin"]
    # areas none 4, 6, classifier 2, 3: pairs (b - new) 2, 1, 4, 3 over b 4, 4, 6, 6
    assert rd.runs == 2
    assert rd.mean == pytest.approx(2.5 / 5)
    # (s_n^2 / mu_d^2 + mu_n^2 s_d^2 / mu_d^4 - 2 mu_n s_nd / mu_d^3) / R, ddof 1
    assert rd.variance == pytest.approx((5 / 3 / 25 + 6.25 * 4 / 3 / 625 - 5 * 4 / 3 / 125) / 2)
    text = table(records[:4])
    # 17 runs after the design, 15% of the pool failing: random sampling loses 2.55
    assert (
        "| branin | 15% | classifier | 2 | 2/40 | 5.9% | 1 | 2.55 | 1 | 2.5 | 50.0 ± 11.5 | n/a |"
        in text
    )
    assert "| branin | 15% | none | 2 | 2/40 | 5.9% | 1 | 2.55 | 1 | 5 | baseline | n/a |" in text


def test_the_table_pools_and_takes_medians():
    records = [
        record(m, s, [[3, 1.0 + s]], failed=f, rmse=1.0 + s)
        for m, f in (("none", 5), ("classifier", 1))
        for s in (0, 1)
    ]
    text = table(records)
    # equal areas 2 and 4 each: pairs (b - new) 0, -2, 2, 0 over b 2, 2, 4, 4; sd sqrt(4/27)
    assert (
        "| branin | 15% | classifier | 2 | 2/40 | 5.9% | 1 | 2.55 | 1.5 | 3 | 0.0 ± 38.5 | n/a |"
        in text
    )
    assert (
        "| branin | 15% | none | 2 | 10/40 | 29.4% | 5 | 2.55 | 1.5 | 3 | baseline | n/a |" in text
    )


def test_each_classifier_arm_has_its_own_rd_auc_against_none():
    records = [
        record(m, s, [[3, area]], failed=1, rmse=1.0)
        for m, areas in (
            ("none", (2.0, 4.0)),
            ("classifier", (2.0, 4.0)),
            ("classifier@0.3", (1.0, 2.0)),
        )
        for s, area in enumerate(areas)
    ]
    text = table(records)
    assert "| branin | 15% | classifier | 2 |" in text and "| 0.0 ± 38.5 |" in text
    # its curves lie lower than none's: a positive RD-AUC on its own row
    rd = rd_auc_by_simulator(records, new="classifier@0.3")["branin"]
    assert rd.mean > 0 and f"| {100 * rd.mean:.1f} ± {100 * rd.sd:.1f} |" in text


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
    for bad in ("forest", "none@0.3", "classifier@x"):
        with pytest.raises(ValueError):
            failures_option(bad)


def test_random_sampling_loss_and_the_brier_score_by_hand():
    # 27 runs after the design, 588 of 3,993 pool points failing: 27 x 0.14726 = 3.976
    r = record("classifier", 0, [[3, 1.0]])
    r.update(runs_after_design=27, region_fraction=588 / 3993)
    assert random_loss(r) == pytest.approx(27 * 588 / 3993) == pytest.approx(3.97596, abs=1e-5)
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
    if out["failed"]:
        assert 0.0 <= out["brier"] <= 1.0
    else:
        assert out["brier"] is None  # no run failed: no failure model, no probabilities
    assert np.isfinite(out["rmse_feasible"])
