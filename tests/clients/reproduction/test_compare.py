"""Two protocols' RD-AUC tables side by side with the paper's (:mod:`clients.reproduction.compare`),
and how far each is from the paper's."""

import json

import pytest

from fbgp_al.clients.reproduction.compare import gaps, side_by_side
from fbgp_al.clients.reproduction.compare import main as compare_main
from fbgp_al.clients.reproduction.rdauc import load_paper_table
from fbgp_al.clients.reproduction.report import write_report
from tests.clients.reproduction.test_rdauc import _synthetic, _write


def test_two_protocols_side_by_side(tmp_path, capsys):
    """The paper's cell, each protocol's (mean ± sd (runs)), and the code's NLML of the second."""
    base_dir, other_dir = tmp_path / "base", tmp_path / "other"
    for d in (base_dir, other_dir):
        d.mkdir()
    records = _synthetic(other_dir / "results.jsonl")
    _write(
        base_dir / "results.jsonl",
        [{k: v for k, v in r.items() if k != "nlml_paper"} for r in records if r["run"] == 0],
    )
    write_report(base_dir / "results.jsonl", base_dir)
    write_report(other_dir / "results.jsonl", other_dir)
    base, other = (json.loads((d / "rdauc.json").read_text()) for d in (base_dir, other_dir))
    text = side_by_side(base, other, ("today", "paper-code"))
    lines = text.splitlines()
    at = lines.index(next(line for line in lines if line.startswith("| b-qbc | paper |")))
    assert lines[at].split(" | ")[2] == "36.3 ± 1.0"
    assert lines[at + 1].split(" | ")[1:3] == ["today", "100.0 (1)"]
    assert lines[at + 2].split(" | ")[1:3] == ["paper-code", "100.0 ± 0.0 (2)"]
    assert lines[at + 3].split(" | ")[1:3] == ["paper-code, the code's NLML", "36.3 ± 0.0 (2)"]
    assert "#### RMSE" in text and "| alm |" not in text
    # the command prints the same, and refuses a file that is not there
    paths = [str(d / "rdauc.json") for d in (base_dir, other_dir)]
    compare_main([*paths, "--names", "today,paper-code"])
    assert capsys.readouterr().out.startswith(text)
    with pytest.raises(SystemExit) as exit_:
        compare_main([paths[0], str(tmp_path / "missing.json")])
    assert exit_.value.code == 2 and "no file" in capsys.readouterr().err


def _table(cells: dict, code: dict | None = None) -> dict:
    """An ``rdauc.json``-shaped dict: ``cells[(metric, acq, sim)] = (mean, sd, runs)`` against
    the paper's Table 2; ``code``, the same for ``nlml_paper``."""
    paper = load_paper_table()
    metrics: dict = {}
    for name, source in (("nlml", cells), ("rmse", cells), ("nlml_paper", code or {})):
        if name == "nlml_paper" and not code:
            continue
        per_acq = metrics.setdefault(name, {"alm": {}})
        for (metric, acq, sim), (mean, sd, runs) in source.items():
            if metric != name.split("_")[0]:
                continue
            theirs = paper[metric][acq][sim]
            per_acq.setdefault(acq, {})[sim] = {
                "ours": {"mean": mean, "sd": sd, "runs": runs},
                "paper": theirs,
            }
    return {"baseline": "alm", "columns": ["gramacy1d", "branin"], "metrics": metrics}


def test_gaps_count_the_cells_both_protocols_ran():
    """Mean absolute gap over the shared cells, cells beyond 2 paper ±, and beyond 2 of
    sqrt(pm^2 + sd^2); a cell only one protocol has is left out of every row."""
    paper = load_paper_table()
    g_pm = paper["nlml"]["b-qbc"]["gramacy1d"]  # 36.3 ± 1.0
    b_pm = paper["nlml"]["b-qbc"]["branin"]  # 33.1 ± 1.2
    r_pm = paper["rmse"]["b-qbc"]["gramacy1d"]  # 20.8 ± 0.9
    base = _table(
        {
            ("nlml", "b-qbc", "gramacy1d"): (g_pm["mean"] + 10, 1.0, 3),
            ("nlml", "b-qbc", "branin"): (b_pm["mean"] - 1, 1.0, 3),
            ("rmse", "b-qbc", "gramacy1d"): (r_pm["mean"], 0.5, 3),
        }
    )
    other = _table(
        {
            ("nlml", "b-qbc", "gramacy1d"): (g_pm["mean"] - 4, 3.0, 5),
            ("nlml", "b-qbc", "branin"): (b_pm["mean"] + 3, 0.1, 5),
            ("nlml", "bald", "gramacy1d"): (0.0, 1.0, 5),  # base has no such cell
            ("rmse", "b-qbc", "gramacy1d"): (r_pm["mean"] + 2, 0.1, 5),
        },
        code={
            ("nlml", "b-qbc", "gramacy1d"): (g_pm["mean"], 1.0, 5),
            ("nlml", "b-qbc", "branin"): (b_pm["mean"] + 6, 1.0, 5),
        },
    )
    rows = {
        tuple(line.split(" | ")[:2]): line.split(" | ")[2:]
        for line in gaps(base, other, ("today", "code")).splitlines()
        if " | NLML | " in line or " | RMSE | " in line
    }
    # |+10|, |-1|: 10 > 2, 10 > 2.8; sd / pm: 1 / 1, 1 / 1.2
    assert rows[("| today", "NLML")] == ["5.5", "5.5", "1", "1", "0.92 |"]
    # 4 > 2 but < 2 * 3.2; 3 > 2.4; sd / pm: 3 / 1, 0.1 / 1.2
    assert rows[("| code", "NLML")] == ["3.5", "3.5", "2", "1", "1.54 |"]
    assert rows[("| code, the code's NLML", "NLML")] == ["3.0", "3.0", "1", "1", "0.92 |"]
    assert rows[("| today", "RMSE")] == ["0.0", "0.0", "0", "0", "0.56 |"]
    assert rows[("| code", "RMSE")][:3] == ["2.0", "2.0", "1"]  # 2 > 1.8, and > 2 * hypot(0.9, 0.1)
    assert "Over 2 cells (1 acquisitions x 2 simulators)" in gaps(base, other)
