"""Issue 40's levers side by side (:mod:`clients.reproduction.speed_levers`, ``fbgp-al
bench-core --cases stop|screen|repro-screen|subset|proposals|search``), at small sizes."""

import json

import numpy as np
import pytest

from fbgp_al.clients.reproduction.speed_levers import (
    _ranking_against,
    compare_proposals,
    compare_reproduction_screening,
    compare_screening,
    compare_stop_rules,
    compare_subset,
    time_cold_search,
)


def test_a_ranking_is_compared_with_the_references_by_the_rank_of_its_choice():
    """The reference's rank of the point chosen, the top-k overlap and the reference's score of
    the choice relative to its best, on scores made by hand."""
    reference = np.array([0.1, 0.9, 0.5, 0.7, 0.2])
    same = _ranking_against(reference * 2, reference, k=2)
    assert same == {"rank": 0, "overlap": 1.0, "relative": 1.0}
    other = _ranking_against(np.array([0.0, 0.1, 0.2, 0.9, 0.3]), reference, k=2)
    assert other["rank"] == 1 and other["overlap"] == 0.5
    assert other["relative"] == pytest.approx(0.7 / 0.9)


def test_stop_rules_and_screening_report_their_rows(capsys):
    """Both cases run end to end at a small size and say what they compare."""
    rows = compare_stop_rules("branin", 12, "uniform", seeds=(0,), candidates=200,
                              reference_draws=60)  # fmt: skip
    assert {r["rule"] for r in rows} == {"rhat", "ess", "ess-w20"}
    assert all(r["refit_s"] > 0 and 0 <= r["rank"] < 200 for r in rows)
    rows = compare_screening("branin", 12, "uniform", seeds=(0,), acquisitions=("qb-mgp",),
                             candidates=1500)  # fmt: skip
    (row,) = rows
    assert row["exact_where_kept"] and row["same_point"]
    out = capsys.readouterr().out
    assert "seed against seed" in out and "screened" in out


def test_a_subsets_hyperparameters_are_compared_with_all_labels(capsys):
    """The subset case at a small size: a row per seed and way, the subset sampled on fewer
    labels, and the verdict on the next point printed."""
    rows = compare_subset("branin", 40, subset=15, seeds=(0,), candidates=1500, test_points=200)
    assert [r["how"] for r in rows] == ["all", "subset", "laplace", "laplace-warm",
                                        "laplace-search"]  # fmt: skip
    assert rows[0]["khat"] is None and all(r["khat"] is not None for r in rows[2:])
    assert [r["start"] for r in rows[2:]] == ["cold", "warm", "warm+cold"]
    assert all(r["rmse"] > 0 and np.isfinite(r["nlpd"]) and len(r["median_log_draws"]) == 3
               for r in rows)  # fmt: skip
    assert "same next point" in capsys.readouterr().out


def test_the_proposals_are_compared_by_their_pareto_k(capsys):
    """The proposals case at a small size: a row per proposal, each with a k per seed and the
    count within the limit."""
    rows = compare_proposals("branin", 30, seeds=(0, 1))
    assert [(r["df"], r["proposals"]) for r in rows] == [(None, 150), (None, 300), (5.0, 150),
                                                         (5.0, 300), (5.0, None)]  # fmt: skip
    assert all(len(r["khat"]) == 2 and 0 <= r["passed"] <= 2 for r in rows)
    assert "draws weighed: k" in capsys.readouterr().out


def test_bench_core_runs_a_lever_for_the_seeds_it_is_given(capsys):
    """``fbgp-al bench-core --cases screen --seeds 4``: one seed's rows, that seed's."""
    from fbgp_al.clients.reproduction.core_benchmark import main

    main(["--cases", "screen", "--simulators", "branin", "--sizes", "12", "--data", "uniform",
          "--seeds", "4"])  # fmt: skip
    out = capsys.readouterr().out
    assert "branin n=12 uniform seed 4 qb-mgp" in out and "seed 0" not in out


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
                record = {"simulator": "branin", "acquisition": name, "run": 0, "n_labeled": n,
                          "nlml": 0.0, "rmse": 0.0, "x": x[new].tolist(),
                          "y": y[new].tolist()}  # fmt: skip
                f.write(json.dumps(record) + "\n")
    monkeypatch.setattr(ranking, "SCREEN_WORK", 0)
    rows = compare_reproduction_screening("branin", [12], runs=(0,),
                                          acquisitions=("qb-mgp", "bald"), preset="fast",
                                          results=path)  # fmt: skip
    (row,) = rows
    assert (row["acquisition"], row["n"], row["screened"]) == ("qb-mgp", 12, True)
    assert row["same_point"] and row["best_in_screen"] < ranking.SCREEN_KEEP
    out = capsys.readouterr().out
    assert "bald: 10 labels stored, not 12" in out
    assert "the same next point in 1 of 1 screened states" in out


def test_the_cold_search_finds_the_same_minima_ranking_its_starts_by_values_alone(capsys):
    """``--cases search`` at a small size: the search by values alone and by the gradient call
    reach the same minima (the values are the call's, bit for bit), both timed."""
    (row,) = time_cold_search("branin", [25])
    assert row["same"] and row["values"] > 0 and row["call"] > 0
    assert "the same minima: True" in capsys.readouterr().out
