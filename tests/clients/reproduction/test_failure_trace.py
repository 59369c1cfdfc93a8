"""Where later failures fall (:mod:`clients.reproduction.failure_trace`): distances and the
failure model read off a hand-made record, against the failure model fitted directly."""

import json

import numpy as np
import pytest

from fbgp_al.clients.reproduction.failure_regions import case_region, failures_option, main
from fbgp_al.clients.reproduction.failure_trace import later_failures, model_features
from fbgp_al.worker.feasibility.campaign import fit_campaign


def _record():
    """Branin's pool coordinates: a design of three, a failure at (0.9, 0.9) after it, then
    successes, a second failure at (0.6, 0.95), a success at (0.85, 0.65) and a third failure at
    (0.95, 0.6)."""
    runs = [
        ([0.1, 0.1], False),
        ([0.5, 0.2], False),
        ([0.2, 0.7], False),
        ([0.9, 0.9], True),
        ([0.6, 0.5], False),
        ([0.6, 0.95], True),
        ([0.3, 0.3], False),
        ([0.85, 0.65], False),
        ([0.95, 0.6], True),
    ]
    return {
        "simulator": "branin",
        "seed": 4,
        "model": "classifier",
        "design_runs": 3,
        "runs_at": [[u, f] for u, f in runs],
    }


def test_later_failures_by_hand():
    sim, _ = case_region("branin")
    rows = later_failures(_record(), sim, failures_option("classifier"))
    # the first failure has none before it; the two after it are read
    assert [r["run"] for r in rows] == [5, 8]
    second, third = rows
    assert second["to_success"] == pytest.approx(np.hypot(0.0, 0.45))  # (0.6, 0.5)
    assert second["to_failure"] == pytest.approx(np.hypot(0.3, 0.05))
    assert second["successes_nearer"] == 0  # (0.6, 0.5) is 0.45 away, (0.9, 0.9) 0.30
    assert third["to_success"] == pytest.approx(np.hypot(0.1, 0.05))
    assert third["to_failure"] == pytest.approx(np.hypot(0.05, 0.3))  # (0.9, 0.9)
    assert third["successes_nearer"] == 1
    # the failure model of the runs before the third failure, fitted directly
    u = np.array([row[0] for row in _record()["runs_at"]])
    x = sim.from_unit(u).tolist()
    failed = [f for _, f in _record()["runs_at"]]
    model = fit_campaign(
        {"inputs": sim.inputs(), "failures": {"model": "classifier"}},
        [{"x": x[i]} for i in range(8) if not failed[i]],
        [{"x": x[i]} for i in range(8) if failed[i]],
        0,
    )
    at = model_features(sim, u[8:9])
    assert third["p_success"] == model.p_success(at)[0]
    assert third["weight"] == model.weigh(at)[1][0]
    assert 0.0 < third["weight"] < third["p_success"] < 1.0


def test_the_later_option_prints_a_line_per_later_failure(tmp_path, capsys):
    path = tmp_path / "records.jsonl"
    none = dict(_record(), model="none")  # no failure model: not read
    path.write_text(json.dumps(_record()) + "\n" + json.dumps(none) + "\n")
    main(["--later", str(path)])
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 4 and lines[2].startswith("| branin | 4 | 5 | 0.45 | 0.30 | 0 |")
    with pytest.raises(SystemExit):
        main(["--cases", "branin"])  # a benchmark needs --url
