"""What ``fbgp-al bench-failures`` records say (:mod:`clients.reproduction.failure_report`): the
area under a campaign's feasible RMSE curve carries a missing version's value forward, the RD-AUC
of the classifier's areas against none's is Algorithm 1's, the table pools and takes medians, and
the goals read the runs lost against a third of random sampling's and the final error's ratio to
none's on the same seeds, its interval Student's t by hand."""

import json
import math

import numpy as np
import pytest
from scipy import stats

from fbgp_al.clients.reproduction.failure_regions import main
from fbgp_al.clients.reproduction.failure_report import (
    curve_auc,
    goals,
    paired_ratio,
    random_loss,
    rd_auc_by_simulator,
    table,
)


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


def test_random_sampling_s_loss_by_hand():
    # 27 runs after the design, 588 of 3,993 pool points failing: 27 x 0.14726 = 3.976
    r = record("classifier", 0, [[3, 1.0]])
    r.update(runs_after_design=27, region_fraction=588 / 3993)
    assert random_loss(r) == pytest.approx(27 * 588 / 3993) == pytest.approx(3.97596, abs=1e-5)
    r["random_loss"] = 2.0  # what the run wrote wins
    assert random_loss(r) == 2.0


def test_the_final_error_s_ratio_to_none_s_and_its_interval_by_hand():
    # per seed none 1, 2, 4 and the classifier 1.1, 1.8, 4.4; seed 3 has no none run
    records = [record("none", s, [[3, 1.0]], rmse=v) for s, v in enumerate((1.0, 2.0, 4.0))]
    records += [
        record("classifier", s, [[3, 1.0]], rmse=v) for s, v in enumerate((1.1, 1.8, 4.4, 9.0))
    ]
    ratio, low, high, paired = paired_ratio(records, "branin", "classifier", 0.9)
    logs = np.log([1.1, 0.9, 1.1])
    # mean ± t(0.95, 2) sd / sqrt(3), t(0.95, 2) = 2.919986 (a table's value)
    half = 2.919986 * logs.std(ddof=1) / math.sqrt(3)
    assert paired == 3
    assert ratio == pytest.approx(math.exp(logs.mean()))
    assert low == pytest.approx(math.exp(logs.mean() - half), rel=1e-6)
    assert high == pytest.approx(math.exp(logs.mean() + half), rel=1e-6)
    assert stats.t.ppf(0.95, 2) == pytest.approx(2.919986, rel=1e-6)
    assert np.isnan(paired_ratio(records[:1] + records[3:4], "branin", "classifier")[1])


def test_the_goals_read_each_arm_against_both():
    # 17 runs after the design at 15%: random loses 2.55, a third of it 0.85
    records = [record("none", s, [[3, 1.0]], failed=9, rmse=1.0) for s in range(3)]
    records += [
        record("classifier", s, [[3, 1.0]], failed=f, rmse=v)
        for s, (f, v) in enumerate(((0, 1.01), (1, 0.99), (0, 1.0)))
    ]
    records += [
        record("classifier@0.3", s, [[3, 1.0]], failed=2, rmse=v)
        for s, v in enumerate((1.5, 1.6, 1.4))
    ]
    text = goals(records)
    assert "| none |" not in text
    row = next(line for line in text.splitlines() if "| classifier |" in line)
    assert row.startswith("| branin | classifier | 3 | 0 | 0.85 | yes | 1.000 (")
    assert row.endswith("| 3 | not shown worse | n/a |")  # no rmse_noise: no labels column
    row = next(line for line in text.splitlines() if "| classifier@0.3 |" in line)
    geometric = (1.5 * 1.6 * 1.4) ** (1 / 3)  # 1.498
    assert row.startswith(f"| branin | classifier@0.3 | 3 | 2 | 0.85 | no | {geometric:.3f} (")
    assert row.endswith("| 3 | worse | n/a |")


def test_the_table_of_records_written_before(tmp_path, capsys):
    records = [
        record(m, s, [[3, 1.0 + s]], rmse=1.0 + s) for m in ("none", "classifier") for s in (0, 1)
    ]
    for i, part in enumerate((records[:3], records[3:])):
        (tmp_path / f"{i}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part))
    main(["--table", str(tmp_path / "0.jsonl"), str(tmp_path / "1.jsonl")])
    out = capsys.readouterr().out
    assert table(records) in out and goals(records) in out
    assert "| branin | classifier | 2 | 1 | 0.85 | no | 1.000 (" in out
