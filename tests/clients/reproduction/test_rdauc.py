"""RD-AUC (the paper's Algorithm 1) on hand-computed cases, the table beside the paper's, and the
cells far from the paper's."""

import json
import math

import numpy as np
import pytest

from fbgp_al.clients.reproduction.rdauc import (
    PAPER_SIMULATORS,
    auc,
    far_from_paper,
    load_paper_table,
    overall,
    rd_auc,
    rd_auc_curves,
    summarize,
    table_json,
    table_markdown,
    write_table,
)
from fbgp_al.clients.reproduction.report import write_report
from fbgp_al.clients.reproduction.results import Curves, append_record, read_results


def test_auc_trapezoid():
    assert auc([1, 2, 3]) == 4.0
    assert auc([1, 2, 3], n_labeled=[3, 5, 7]) == 8.0
    np.testing.assert_array_equal(auc([[1, 1], [0, 2]]), [1.0, 1.0])


def test_rd_auc_hand_computed():
    # pairs, baseline outer: n = [10-8, 10-5, 12-8, 12-5] = [2, 5, 4, 7], d = [10, 10, 12, 12]
    # mu_n = 4.5, mu_d = 11; ddof 1: var_n = 13/3, var_d = 4/3, cov = 4/3
    # var = (13/3/11^2 + 4.5^2 (4/3)/11^4 - 2*4.5 (4/3)/11^3) / 2
    #     = (1573 + 81 - 396) / 43923 / 2 = 629/43923
    r = rd_auc([10, 12], [8, 5])
    assert r.mean == pytest.approx(9 / 22)
    assert r.variance == pytest.approx(629 / 43923)
    assert r.sd == pytest.approx(math.sqrt(629 / 43923))
    assert r.runs == 2
    # a lower bound moves only the denominator: d = b - 2 -> [8, 8, 10, 10], mu_d = 9
    assert rd_auc([10, 12], [8, 5], auc_best=2.0).mean == pytest.approx(0.5)


def test_rd_auc_against_itself_and_degenerate_cases():
    same = rd_auc([3.0, 5.0, 4.0], [3.0, 5.0, 4.0])
    assert same.mean == 0.0 and same.variance > 0  # ALM's own "0.0 +- x" in the paper
    assert rd_auc([2.0, 2.0], [1.0, 1.0]).variance == 0.0
    assert rd_auc([2.0, 2.0], [1.0, 1.0]).mean == 0.5
    assert math.isnan(rd_auc([2.0], [1.0]).variance)
    assert math.isnan(rd_auc([2.0, 2.0], [1.0, 1.0], auc_best=2.0).mean)  # baseline on the bound
    with pytest.raises(ValueError, match="same number"):
        rd_auc([1.0, 2.0], [1.0])


def test_unbounded_metric_is_shifted_by_the_lowest_value():
    x = np.array([3, 4])
    curves = {
        "alm": Curves(x, np.array([[2.0, 0.0]]), np.array([0])),
        "b-qbc": Curves(x, np.array([[1.0, -1.0]]), np.array([0])),
    }
    # AUC alm 1, b-qbc 0; lowest value -1 -> AUC_best = -1: (1 - 0) / (1 - (-1))
    assert rd_auc_curves(curves, bounded=False)["b-qbc"].mean == pytest.approx(0.5)
    # bounded by 0: (1 - 0) / 1
    assert rd_auc_curves(curves, bounded=True)["b-qbc"].mean == pytest.approx(1.0)
    assert rd_auc_curves(curves, bounded=True)["alm"].mean == 0.0


def test_overall_reproduces_the_papers_table():
    paper = load_paper_table()
    for metric in ("nlml", "rmse"):
        for acq, row in paper[metric].items():
            stats = overall({s: row[s]["mean"] for s in PAPER_SIMULATORS})
            assert stats["sd"] == pytest.approx(row["overall_mean"]["pm"], abs=0.06)
            if (metric, acq) == ("rmse", "b-qbc"):
                continue  # the paper prints 9.2 / 4.7 where its own row gives 9.4 / 5.2
            assert stats["mean"] == pytest.approx(row["overall_mean"]["mean"], abs=0.051)
            assert stats["median"] == pytest.approx(row["overall_median"]["mean"], abs=0.051)


def _write_results(path):
    """branin: the hand case of test_rd_auc_hand_computed for RMSE (constant curves over 3
    steps have AUC 2c), and for NLML alm [1, 0, -1], [2, 2, 2]; qb-mgp [0, -1, -2], [1, 1, 1];
    motorcycle: one run each (outside the overall columns)."""
    curves = {
        ("branin", "alm", 0): ([1, 0, -1], 5),
        ("branin", "alm", 1): ([2, 2, 2], 6),
        ("branin", "qb-mgp", 0): ([0, -1, -2], 4),
        ("branin", "qb-mgp", 1): ([1, 1, 1], 2.5),
        ("motorcycle", "alm", 0): ([1, 1, 1], 1),
        ("motorcycle", "qb-mgp", 0): ([1, 1, 1], 2),
    }
    for (sim, acq, run), (nlml, rmse) in curves.items():
        for step, value in enumerate(nlml):
            append_record(
                path,
                {
                    "simulator": sim,
                    "acquisition": acq,
                    "run": run,
                    "n_labeled": 3 + step,
                    "nlml": value,
                    "rmse": rmse,
                },
            )


def test_summarize_and_tables(tmp_path):
    path = tmp_path / "results.jsonl"
    _write_results(path)
    summary = summarize(read_results(path))
    rmse = summary["rmse"]["qb-mgp"]
    assert rmse["branin"]["mean"] == pytest.approx(100 * 9 / 22)
    assert rmse["branin"]["sd"] == pytest.approx(100 * math.sqrt(629 / 43923))
    assert rmse["branin"]["runs"] == 2
    assert rmse["motorcycle"]["mean"] == pytest.approx(-100.0)  # (2 - 4) / 2
    # overall over the paper's simulators only: here branin alone
    assert rmse["overall_mean"] == {"mean": pytest.approx(100 * 9 / 22), "sd": 0.0}
    # NLML: AUCs alm [0, 4], qb-mgp [-2, 2]; lowest -2 -> AUC_best -4;
    # n = [2, -2, 6, 2], d = [4, 4, 8, 8]: 2 / 6
    assert summary["nlml"]["qb-mgp"]["branin"]["mean"] == pytest.approx(100 / 3)
    assert summary["nlml"]["alm"]["branin"]["mean"] == 0.0

    data = table_json(summary)
    assert data["columns"] == ["branin", "motorcycle", "overall_mean", "overall_median"]
    assert data["overall_over"] == ["branin"]
    cell = data["metrics"]["rmse"]["qb-mgp"]["branin"]
    assert cell["paper"] == {"mean": 3.1, "pm": 1.0}
    assert cell["ours"]["mean"] == pytest.approx(40.91, abs=0.01)
    assert data["metrics"]["rmse"]["qb-mgp"]["motorcycle"]["paper"] is None
    assert data["metrics"]["rmse"]["bald"]["branin"]["ours"] is None  # paper-only row

    md = table_markdown(summary)
    assert "| acquisition | source | branin | motorcycle | overall mean | overall median |" in md
    assert "| qb-mgp | ours | 40.9 ± 12.0 | -100.0 ± n/a | 40.9 ± 0.0 | 40.9 ± 0.0 |" in md
    assert "|  | paper | 3.1 ± 1.0 |  | 12.0 ± 5.7 | 11.1 ± 5.7 |" in md
    assert "### NLML" in md and "### RMSE" in md

    md_path, json_path = write_table(path, tmp_path / "out")
    # the tables, then the cells far from the paper's (here qb-mgp's rmse on branin)
    assert md_path.read_text(encoding="utf-8").startswith(md + "\nRD-AUC cells more than 2 ")
    # strict JSON: the undefined sd of a single run is null, not NaN
    written = json.loads(json_path.read_text(), parse_constant=lambda c: pytest.fail(c))
    assert written["metrics"]["rmse"]["qb-mgp"]["motorcycle"]["ours"]["sd"] is None


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _synthetic(path):
    """Two identical runs of gramacy1d for alm, b-qbc and qb-mgp, flat curves over 3..5
    labels. RD-AUC (%): rmse b-qbc 50 (paper 20.8 ± 0.9: far), qb-mgp 20 (19.6 ± 0.8: near);
    nlml b-qbc 100 (36.3 ± 1.0: far), qb-mgp 20.6 (20.6 ± 0.9); nlml_paper qb-mgp 100
    (the paper's NLML 20.6 ± 0.9: far), b-qbc 36.3."""
    values = {
        "alm": (1.0, 1.0, 1.0),
        "b-qbc": (0.5, 1 - 0.363, 0.5),
        "qb-mgp": (1 - 0.103, 0.0, 0.8),
    }
    records = []
    for acq, (nlml, nlml_paper, rmse) in values.items():
        for run in (0, 1):
            for n in (3, 4, 5):
                records.append(
                    {
                        "simulator": "gramacy1d",
                        "acquisition": acq,
                        "run": run,
                        "n_labeled": n,
                        "nlml": nlml,
                        "nlml_paper": nlml_paper,
                        "rmse": rmse,
                        "max_labels": 5,
                        "refit_seconds": 1.0,
                        "max_rhat": 1.0,
                        "min_ess": 100.0,
                        "divergences": 0,
                    }
                )
    _write(path, records)
    return records


def test_the_cells_far_from_the_paper(tmp_path):
    records = _synthetic(tmp_path / "results.jsonl")
    summary = summarize(records)
    assert summary["nlml_paper"]["qb-mgp"]["gramacy1d"]["mean"] == pytest.approx(100)
    far = far_from_paper(summary, load_paper_table())
    assert [(c["metric"], c["acquisition"], c["simulator"]) for c in far] == [
        ("nlml", "b-qbc", "gramacy1d"),
        ("rmse", "b-qbc", "gramacy1d"),
        ("nlml_paper", "qb-mgp", "gramacy1d"),
    ]
    nlml, rmse, paper = far
    assert nlml["ours"] == pytest.approx(100) and nlml["paper"] == 36.3
    assert nlml["gap"] == pytest.approx((100 - 36.3) / 1.0)
    assert rmse["ours"] == pytest.approx(50) and rmse["gap"] == pytest.approx((50 - 20.8) / 0.9)
    assert paper["paper"] == 20.6 and paper["gap"] == pytest.approx((100 - 20.6) / 0.9)
    assert rmse["runs"] == 2 and rmse["sd"] == pytest.approx(0)
    # our spread is 0 here: the joint gap is the gap in paper-sds
    assert rmse["joint_gap"] == pytest.approx(rmse["gap"])
    one_run = summarize([r for r in records if r["run"] == 0])
    assert all(np.isnan(c["joint_gap"]) for c in far_from_paper(one_run, load_paper_table()))

    # in the report: the nlml_paper table, the section, and the cells in rdauc.json
    write_report(tmp_path / "results.jsonl", tmp_path)
    md = (tmp_path / "rdauc.md").read_text()
    assert "### NLML as the paper's code computes it" in md
    row = "| nlml_paper | qb-mgp | gramacy1d | 100.0 ± 0.0 (2 runs) | 20.6 ± 0.9 | +88.2 | +88.2 |"
    assert row in md
    summary_md = (tmp_path / "summary.md").read_text()
    assert "## Cells more than 2 paper-sds from the paper" in summary_md
    row = "| rmse | b-qbc | gramacy1d | 50.0 ± 0.0 (2 runs) | 20.8 ± 0.9 | +32.4 | +32.4 |"
    assert row in summary_md
    table = json.loads((tmp_path / "rdauc.json").read_text())
    assert len(table["far_from_paper"]) == 3
    assert table["metrics"]["nlml_paper"]["qb-mgp"]["gramacy1d"]["paper"]["mean"] == 20.6


def test_no_nlml_paper_table_without_it(tmp_path):
    records = [
        {k: v for k, v in r.items() if k != "nlml_paper"}
        for r in _synthetic(tmp_path / "results.jsonl")
    ]
    assert set(summarize(records)) == {"nlml", "rmse"}
