"""The JSON-lines results file: writing, reading, curves and labeled points."""

import json

import numpy as np
import pytest

from fbgp_al.clients.reproduction.results import (
    append_record,
    finished,
    labeled_points,
    learning_curves,
    read_results,
    wall_seconds,
)


def _rec(sim, acq, run, n, nlml, rmse, **extra):
    return {
        "simulator": sim,
        "acquisition": acq,
        "run": run,
        "n_labeled": n,
        "nlml": nlml,
        "rmse": rmse,
        **extra,
    }


def test_round_trip_duplicates_and_errors(tmp_path):
    path = tmp_path / "results.jsonl"
    append_record(path, _rec("higdon", "alm", 0, 3, 1.0, 0.5))
    append_record(path, _rec("higdon", "alm", 0, 4, 0.9, 0.4, seconds=2.5))
    append_record(path, _rec("higdon", "alm", 0, 4, 0.8, 0.3))  # a rewrite of step 4 wins
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[1])["seconds"] == 2.5
    records = read_results(path)
    assert sorted((r["n_labeled"], r["nlml"]) for r in records) == [(3, 1.0), (4, 0.8)]

    with pytest.raises(ValueError, match="lacks"):
        append_record(path, {"simulator": "higdon"})
    with path.open("a") as f:
        f.write("\n" + json.dumps({"simulator": "higdon", "run": 0}) + "\n")
    with pytest.raises(ValueError, match=r"results.jsonl:5"):
        read_results(path)


def test_learning_curves_cut_to_common_steps():
    records = [_rec("branin", "alm", r, n, float(n + r), 0.0) for r in (0, 1) for n in (3, 4, 5)]
    records += [_rec("branin", "bald", 0, n, -float(n), 0.0) for n in (3, 4)]  # stopped early
    records += [_rec("higdon", "alm", 0, n, 1.0, 0.0) for n in (3, 4, 5)]
    curves = learning_curves(records, "nlml")
    assert set(curves) == {"branin", "higdon"}
    alm = curves["branin"]["alm"]
    np.testing.assert_array_equal(alm.n_labeled, [3, 4])
    np.testing.assert_array_equal(alm.values, [[3, 4], [4, 5]])
    np.testing.assert_array_equal(alm.runs, [0, 1])
    np.testing.assert_array_equal(curves["branin"]["bald"].values, [[-3, -4]])
    np.testing.assert_array_equal(curves["higdon"]["alm"].n_labeled, [3, 4, 5])


def test_labeled_points_in_order():
    records = [
        _rec("branin", "alm", 0, 4, 0, 0, x=[[5.0, 6.0]], y=[2.0]),
        _rec("branin", "alm", 0, 3, 0, 0, x=[[0, 1], [1, 2], [2, 3]], y=[1, 1, 1]),
        _rec("branin", "alm", 1, 3, 0, 0, x=[[9, 9]], y=[9]),
        _rec("branin", "alm", 0, 5, 0, 0),  # no points recorded at this step
    ]
    X, y = labeled_points(records, "branin", "alm", 0)
    np.testing.assert_array_equal(X, [[0, 1], [1, 2], [2, 3], [5, 6]])
    np.testing.assert_array_equal(y, [1, 1, 1, 2])
    X, y = labeled_points(records, "branin", "bald", 0)
    assert X.size == 0 and y is None


def test_runs_short_of_their_simulators_longest_are_left_out():
    def rec(sim, acq, run, n):
        return {"simulator": sim, "acquisition": acq, "run": run, "n_labeled": n}

    records = [rec("a", "alm", 0, n) for n in (3, 4, 5)] + [rec("a", "bald", 0, n) for n in (3, 4)]
    records += [rec("b", "alm", 0, n) for n in (3, 4)]  # another simulator: its own longest
    kept, short = finished(records)
    assert short == [("a", "bald", 0)]
    assert {(r["simulator"], r["acquisition"]) for r in kept} == {("a", "alm"), ("b", "alm")}
    assert len(kept) == 5


def test_runs_that_carry_their_target_are_finished_only_at_it():
    def rec(acq, run, n, **extra):
        return {"simulator": "a", "acquisition": acq, "run": run, "n_labeled": n, **extra}

    # every run of the simulator is short of its 6 labels: none is finished, though "alm" is
    # the longest so far (the rule for records without a target would keep it)
    records = [rec("alm", 0, n, max_labels=6) for n in (3, 4, 5)]
    records += [rec("bald", 0, n, max_labels=6) for n in (3, 4)]
    kept, short = finished(records)
    assert kept == [] and short == [("a", "alm", 0), ("a", "bald", 0)]
    # alm/0 ends; runs without a target (older files) still need the simulator's longest
    records += [rec("alm", 0, 6, max_labels=6)]
    records += [rec("bald", 1, n) for n in (3, 4, 5, 6)] + [rec("b-qbc", 1, n) for n in (3, 4)]
    kept, short = finished(records)
    assert short == [("a", "b-qbc", 1), ("a", "bald", 0)]
    assert {(r["acquisition"], r["run"]) for r in kept} == {("alm", 0), ("bald", 1)}


def test_wall_time_counts_campaigns_side_by_side_once():
    timed = [
        _rec("branin", "alm", 0, 3, 1.0, 1.0, finished_at=110.0, seconds=10.0),  # 100-110
        _rec("branin", "alm", 0, 4, 1.0, 1.0, finished_at=125.0, seconds=15.0),  # 110-125
        _rec("branin", "b-qbc", 0, 3, 1.0, 1.0, finished_at=120.0, seconds=15.0),  # 105-120
        _rec("branin", "b-qbc", 0, 4, 1.0, 1.0, finished_at=1000.0, seconds=20.0),  # 980-1000
        _rec("branin", "bald", 0, 3, 1.0, 1.0, finished_at=990.0, seconds=5.0),  # inside
    ]
    untimed = [_rec("branin", "bald", 0, 4, 1.0, 1.0, seconds=50.0)]
    assert wall_seconds(timed + untimed) == (25.0 + 20.0, 5)
    assert wall_seconds(untimed) == (0.0, 0)
