"""Issue 40's levers side by side (:mod:`clients.reproduction.speed_levers`, ``fbgp-al
bench-core --cases stop|subset|proposals|search``), at small sizes."""

import numpy as np

from fbgp_al.clients.reproduction.speed_levers import (
    compare_proposals,
    compare_stop_rules,
    compare_subset,
    time_cold_search,
)


def test_stop_rules_report_their_rows(capsys):
    """The case runs end to end at a small size and says what it compares."""
    rows = compare_stop_rules(
        "branin", 12, "uniform", seeds=(0,), candidates=200, reference_draws=60
    )
    assert {r["rule"] for r in rows} == {"rhat", "ess", "ess-w20"}
    assert all(r["refit_s"] > 0 and 0 <= r["rank"] < 200 for r in rows)
    assert "seed against seed" in capsys.readouterr().out


def test_a_subsets_hyperparameters_are_compared_with_all_labels(capsys):
    """The subset case at a small size: a row per seed and way, the subset sampled on fewer
    labels, and the verdict on the next point printed."""
    rows = compare_subset("branin", 40, subset=15, seeds=(0,), candidates=1500, test_points=200)
    assert [r["how"] for r in rows] == [
        "all",
        "subset",
        "laplace",
        "laplace-warm",
        "laplace-search",
    ]
    assert rows[0]["khat"] is None and all(r["khat"] is not None for r in rows[2:])
    assert [r["start"] for r in rows[2:]] == ["cold", "warm", "warm+cold"]
    assert all(
        r["rmse"] > 0 and np.isfinite(r["nlpd"]) and len(r["median_log_draws"]) == 3 for r in rows
    )
    assert "same next point" in capsys.readouterr().out


def test_the_proposals_are_compared_by_their_pareto_k(capsys):
    """The proposals case at a small size: a row per proposal, each with a k per seed and the
    count within the limit."""
    rows = compare_proposals("branin", 30, seeds=(0, 1))
    assert [(r["df"], r["proposals"]) for r in rows] == [
        (None, 150),
        (None, 300),
        (5.0, 150),
        (5.0, 300),
        (5.0, None),
    ]
    assert all(len(r["khat"]) == 2 and 0 <= r["passed"] <= 2 for r in rows)
    assert "draws weighed: k" in capsys.readouterr().out


def test_bench_core_runs_a_lever_for_the_seeds_it_is_given(capsys):
    """``fbgp-al bench-core --cases screen --seeds 4``: one seed's rows, that seed's."""
    from fbgp_al.clients.reproduction.core_benchmark import main

    main(
        [
            "--cases",
            "screen",
            "--simulators",
            "branin",
            "--sizes",
            "12",
            "--data",
            "uniform",
            "--seeds",
            "4",
        ]
    )
    out = capsys.readouterr().out
    assert "branin n=12 uniform seed 4 qb-mgp" in out and "seed 0" not in out


def test_the_cold_search_finds_the_same_minima_ranking_its_starts_by_values_alone(capsys):
    """``--cases search`` at a small size: the search by values alone and by the gradient call
    reach the same minima (the values are the call's, bit for bit), both timed."""
    (row,) = time_cold_search("branin", [25])
    assert row["same"] and row["values"] > 0 and row["call"] > 0
    assert "the same minima: True" in capsys.readouterr().out
