"""What scoring costs, in full or screened, side by side
(:mod:`clients.reproduction.screen_levers`, ``fbgp-al bench-core --cases screen|repro-screen``),
at small sizes."""

import json

import numpy as np
import pytest

from fbgp_al.clients.reproduction.screen_levers import (
    compare_reproduction_screening,
    compare_screening,
    ranking_against,
)


def test_a_ranking_is_compared_with_the_references_by_the_rank_of_its_choice():
    """The reference's rank of the point chosen, the top-k overlap and the reference's score of
    the choice relative to its best, on scores made by hand."""
    reference = np.array([0.1, 0.9, 0.5, 0.7, 0.2])
    same = ranking_against(reference * 2, reference, k=2)
    assert same == {"rank": 0, "overlap": 1.0, "relative": 1.0}
    other = ranking_against(np.array([0.0, 0.1, 0.2, 0.9, 0.3]), reference, k=2)
    assert other["rank"] == 1 and other["overlap"] == 0.5
    assert other["relative"] == pytest.approx(0.7 / 0.9)


def test_screening_reports_its_rows(capsys):
    """The case runs end to end at a small size and says what it compares."""
    rows = compare_screening(
        "branin", 12, "uniform", seeds=(0,), acquisitions=("qb-mgp",), candidates=1500
    )
    (row,) = rows
    assert row["exact_where_kept"] and row["same_point"]
    assert "screened" in capsys.readouterr().out


def test_the_reproduction_s_campaigns_are_screened_as_a_campaign_screens_them(
    tmp_path, capsys, monkeypatch
):
    """``--cases repro-screen`` on a results file of two stored campaigns: a row per campaign
    and size asked for (a size the campaign did not reach skipped and said), their labels read
    in the order chosen; screened when the work calls for it (here forced), the exact scores
    kept where screened, and the same next point."""
    from fbgp_al.clients.simulators import get_simulator
    from fbgp_al.worker.fitting import ranking

    sim = get_simulator("branin")
    rng = np.random.default_rng(0)
    path = tmp_path / "results.jsonl"
    with open(path, "w") as f:
        for name, labels in (("qb-mgp", 14), ("bald", 10)):
            x = sim.lower + rng.random((labels, 2)) * (sim.upper - sim.lower)
            y = sim.sample(x, rng)
            for n in range(3, labels + 1):
                new = slice(0, 3) if n == 3 else slice(n - 1, n)
                record = {
                    "simulator": "branin",
                    "acquisition": name,
                    "run": 0,
                    "n_labeled": n,
                    "nlml": 0.0,
                    "rmse": 0.0,
                    "x": x[new].tolist(),
                    "y": y[new].tolist(),
                }
                f.write(json.dumps(record) + "\n")
    monkeypatch.setattr(ranking, "SCREEN_WORK", 0)
    rows = compare_reproduction_screening(
        "branin", [12], runs=(0,), acquisitions=("qb-mgp", "bald"), preset="fast", results=path
    )
    (row,) = rows
    assert (row["acquisition"], row["n"], row["screened"]) == ("qb-mgp", 12, True)
    assert row["same_point"] and row["best_in_screen"] < ranking.SCREEN_KEEP
    out = capsys.readouterr().out
    assert "bald: 10 labels stored, not 12" in out
    assert "the same next point in 1 of 1 screened states" in out
