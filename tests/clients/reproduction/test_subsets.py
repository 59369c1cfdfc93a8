"""Cells over groups of repetitions against the same cells over all of them."""

import json

import pytest

from fbgp_al.clients.reproduction import subsets


def _records(curves: dict[str, list[list[float]]]) -> list[dict]:
    """RMSE records of gramacy1d: ``{acquisition: [one curve per run]}``, labels 3 to 6."""
    return [
        {
            "simulator": "gramacy1d",
            "acquisition": acq,
            "run": run,
            "n_labeled": 3 + i,
            "rmse": value,
            "nlml": value,
        }
        for acq, runs in curves.items()
        for run, curve in enumerate(runs)
        for i, value in enumerate(curve)
    ]


def test_groups_of_repetitions_are_compared_with_all_of_them(capsys):
    # ALM's area is 3 in every run; B-QBC's is 1.5 in runs 0-2 and 2.4 in runs 3-5, each group
    # with a little spread: RMSE RD-AUC 1 - AUC / AUC_ALM is 0.5 and 0.2 by group, 0.35 in all
    low, high = [0.5, 0.5, 0.5, 0.5], [0.8, 0.8, 0.8, 0.8]
    shifts = ((low, -0.01), (low, 0.0), (low, 0.01), (high, -0.01), (high, 0.0), (high, 0.01))
    spread = [[v + d for v in curve] for curve, d in shifts]
    records = _records({"alm": [[1.0] * 4] * 6 + [[1.0] * 4], "b-qbc": spread})
    cells = subsets.subset_cells(records, "rmse", size=3)
    assert [c["runs"] for c in cells] == [[0, 1, 2], [3, 4, 5]]  # run 6 of ALM has no group
    assert [c["acquisition"] for c in cells] == ["b-qbc", "b-qbc"]
    assert [round(c["diff"], 6) for c in cells] == [0.15, -0.15]
    assert cells[0]["full"] == pytest.approx(0.35) and 0 < cells[0]["sd"] < 0.05
    line = subsets.describe(cells, points=10, sds=2)
    assert "2 group cells" in line and "median 15.0 points" in line
    assert "> 10 points: 2 (100%)" in line and "> 2 sd: 2 (100%)" in line
    assert "> 20 points: 0 (0%)" in subsets.describe(cells, points=20, sds=2)


def test_a_simulator_with_no_more_repetitions_than_a_group_is_left_out():
    records = _records({"alm": [[1.0] * 4] * 3, "b-qbc": [[0.5] * 4] * 3})
    assert subsets.subset_cells(records, "rmse", size=3) == []
    assert "no simulator" in subsets.describe([], points=10, sds=2)


def test_the_command_reads_a_results_file_and_refuses_a_missing_one(tmp_path, capsys):
    spread = [[0.5 + d] * 4 for d in (-0.01, 0.0, 0.01, 0.29, 0.3, 0.31)]
    records = _records({"alm": [[1.0] * 4] * 6, "b-qbc": spread})
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    subsets.main([str(path), "--points", "10"])
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == ["nlml", "rmse"]  # no nlml_paper in them
    assert "> 10 points: 2 (100%)" in out[1]
    for argv in ([str(tmp_path / "missing.jsonl")], [str(path), "--size", "1"]):
        with pytest.raises(SystemExit) as exit_:
            subsets.main(argv)
        assert exit_.value.code == 2
    assert "no results file" in capsys.readouterr().err
