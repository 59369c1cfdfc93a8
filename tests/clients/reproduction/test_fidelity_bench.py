"""The in-process multi-fidelity comparison (:mod:`clients.reproduction.fidelity_bench`): its
bookkeeping of cost, the curves' areas and the table, on hand-made records and one short run."""

import io
import json

import numpy as np
import pytest

from fbgp_al.clients.reproduction.fidelity_bench import curve_auc, reached, run, table
from fbgp_al.clients.reproduction.fidelity_problems import PROBLEMS

TINY = {"chains": 1, "warmup": 20, "samples": 10, "thinning": 5}


def _record(arm, seed, curve, budget=3.0):
    return {
        "problem": "forrester",
        "arm": arm,
        "seed": seed,
        "costs": [1.0, 10.0],
        "budget": budget,
        "curve": [[c, r, -r, 1.0] for c, r in curve],
    }


def test_the_areas_carry_the_last_value_forward_and_the_costs_to_reach():
    record = _record("multi", 0, [(1.0, 4.0), (2.0, 2.0), (2.5, 1.0)])
    grid = np.array([1.0, 2.0, 3.0])
    # 4 -> 2 over [1, 2], then 2 held to 2.0 and 1.0 from 2.5 on: the grid sees 2 at 2 and 1 at 3
    assert curve_auc(record, grid) == pytest.approx((4 + 2) / 2 + (2 + 1) / 2)
    assert reached(record, 2.0) == 2.0 and reached(record, 0.5) == float("inf")


def test_the_table_compares_multi_with_single_seed_by_seed():
    records = [
        _record("single", 0, [(1.0, 4.0), (3.0, 2.0)]),
        _record("multi", 0, [(1.0, 4.0), (1.5, 2.0), (3.0, 1.0)]),
        _record("single", 1, [(1.0, 5.0), (3.0, 3.0)]),
        _record("multi", 1, [(1.0, 5.0), (2.0, 3.0), (3.0, 2.0)]),
    ]
    lines = table(records).splitlines()
    assert lines[2].startswith("| forrester | 1:10 | ivr | single | 2 | 2.5 |")
    # multi reached single's final RMSE at 1.5 and 2.0: the median 1.75
    assert lines[3].startswith("| forrester | 1:10 | ivr | multi | 2 | 1.5 |")
    assert "1.75 of 3" in lines[3]
    # an arm without its pair (a run still going): its own row, no comparison
    alone = table(records[:1]).splitlines()
    assert len(alone) == 3 and alone[2].endswith("| 3 | baseline |")


@pytest.mark.parametrize(("arm", "how"), [("single", "ivr"), ("multi", "ivr"), ("multi", "qb-mgp")])
def test_a_short_run_spends_its_budget_at_its_levels_costs(arm, how):
    log = io.StringIO()
    record = run(PROBLEMS["forrester"], arm, (1.0, 10.0), 3.4, 0, TINY, how, log)
    assert record["acquisition"] == how
    assert len(log.getvalue().splitlines()) == len(record["curve"])  # a line per refit
    cheap, dear = record["runs"]
    spent = [c[0] for c in record["curve"]]
    assert spent[0] == pytest.approx(3.0 + (0.6 if arm == "multi" else 0.0))  # the designs
    assert spent[-1] == pytest.approx((cheap + 10 * dear) / 10) and spent[-1] >= 3.4
    assert cheap == 0 if arm == "single" else cheap >= 6
    assert all(np.isfinite(c[1]) and np.isfinite(c[2]) for c in record["curve"])


def test_past_laplace_from_a_run_refits_by_the_mixture_as_a_campaign_does():
    mcmc = {"chains": 1, "warmup": 20, "samples": 40, "thinning": 2, "laplace_from": 10}
    record = run(PROBLEMS["forrester"], "multi", (1.0, 10.0), 4.0, 0, mcmc, "ivr")
    methods = [c[4] for c in record["curve"]]
    assert record["laplace_from"] == 10
    assert methods[0] == "nuts"  # the design's 9 runs
    assert "laplace" in methods[1:]
    # a mixture's check is its Pareto k, NUTS's its R-hat
    for c in record["curve"]:
        assert (c[3] < 0.7) if c[4] == "laplace" else (c[3] >= 0.99)
    assert all(np.isfinite(c[1]) for c in record["curve"])


def test_the_command_runs_each_ratio_at_the_problems_budget(tmp_path, monkeypatch, capsys):
    from fbgp_al.clients.ops import cli
    from fbgp_al.clients.reproduction import fidelity_bench

    monkeypatch.setitem(fidelity_bench.BUDGETS, "forrester", 3.4)
    out = tmp_path / "records.jsonl"
    tiny = ["--chains", "1", "--warmup", "20", "--samples", "10", "--thinning", "5"]
    command = ["bench-fidelity", "--problems", "forrester", "--acquisitions", "ivr", "--seeds", "1"]
    cli.main([*command, *tiny, "--out", str(out)])
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted((r["costs"][1], r["arm"]) for r in records) == [
        (3.0, "multi"),
        (3.0, "single"),
        (10.0, "multi"),
        (10.0, "single"),
    ]
    assert {r["budget"] for r in records} == {3.4}
    printed = capsys.readouterr().out
    assert "| forrester | 1:3 | ivr | multi |" in printed
    assert "| forrester | 1:10 | ivr | multi |" in printed
    assert table(records) == printed.strip()
