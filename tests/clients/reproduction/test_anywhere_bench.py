"""``fbgp-al bench-anywhere`` at a tiny size: the three arms from the same design, each curve one
point per refit, the polished and continuous arms' points off the grid, the records' table with
RD-AUC against the pool; the added problems' functions at known points."""

import json
import math

import numpy as np

from fbgp_al.clients.reproduction import anywhere_bench
from fbgp_al.clients.reproduction.anywhere_bench import PROBLEMS, borehole_mean, friedman_mean

TINY = [
    "--problems", "ishigami", "--runs", "1", "--iterations", "2", "--candidates", "64",
    "--starts", "2", "--chains", "2", "--warmup", "20", "--samples", "10", "--thinning", "2",
]  # fmt: skip


def test_three_arms_from_the_same_design(tmp_path, capsys):
    out = tmp_path / "records.jsonl"
    anywhere_bench.main([*TINY, "--out", str(out)])
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["arm"] for r in records] == ["pool", "polished", "continuous"]
    for r in records:
        assert [c[0] for c in r["curve"]] == [3, 4, 5]
        assert all(c[3] > 0 for c in r["curve"])  # the choice's seconds
    # the same design and labels, the same first model: the same first RMSE and NLPD
    assert len({tuple(r["curve"][0][1:3]) for r in records}) == 1
    assert records[0]["curve"][0][4] == 0 and records[1]["curve"][0][4] > 0  # polish seconds
    table = capsys.readouterr().out
    assert "| ishigami | qb-mgp | pool | 1 |" in table and "baseline" in table
    assert table.count("| ishigami |") == 3
    again = anywhere_bench.table(records)
    assert again == table.strip()


def test_the_added_problems_are_their_functions():
    x = np.full((1, 5), 0.5)
    assert friedman_mean(x)[0] == np.float64(10 * math.sin(math.pi / 4) + 5 + 2.5)
    lo = np.array([b[0] for b in anywhere_bench.BOREHOLE_BOUNDS])
    hi = np.array([b[1] for b in anywhere_bench.BOREHOLE_BOUNDS])
    flows = borehole_mean(np.stack([lo, (lo + hi) / 2, hi]))
    assert (flows > 0).all() and flows.min() > 5 and flows.max() < 400
    more_head = (lo + hi) / 2
    more_head[3] = hi[3]  # the upper aquifer's head up: more water flows
    assert borehole_mean(more_head[None])[0] > flows[1]
    assert PROBLEMS["borehole"].dim == 8 and PROBLEMS["friedman"].dim == 5


def test_the_overhead_of_each_arms_choice_beside_one_sampling(capsys):
    anywhere_bench.main(["--overhead", "12", "--runs", "1", "--acquisitions", "b-qbc", "alm"])
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["seed"], r["acquisition"]) for r in records] == [(0, "b-qbc"), (0, "alm")]
    out = records[0]
    assert out["sample_s"] > 0 and all(out[f"{arm}_s"] > 0 for arm in anywhere_bench.ARMS)
    assert out["pool_polish_s"] == 0 and out["polished_polish_s"] > 0
    assert out["polished_s"] >= out["polished_polish_s"]
