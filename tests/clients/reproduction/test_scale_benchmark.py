"""The scale benchmark's parts: Hartmann 6-D at its known minimizer, seeded data, the default
campaign it refits, and one size measured end to end (small, so that it samples by NUTS)."""

from types import SimpleNamespace

import numpy as np
import pytest

from fbgp_al.clients.reproduction import scale_benchmark as bench

MINIMIZER = np.array([0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573])


def test_hartmann6_has_its_known_minimum_at_its_minimizer():
    assert bench.hartmann6(MINIMIZER[None])[0] == pytest.approx(-3.32237, abs=1e-5)
    rng = np.random.default_rng(0)
    assert bench.hartmann6(rng.random((1000, 6))).min() > -3.32237


def test_the_data_are_seeded_and_the_campaign_is_the_schema_s_default():
    assert bench.labels_of(5, 3) == bench.labels_of(5, 3) != bench.labels_of(5, 4)
    spec = bench.spec_of()
    assert spec["mcmc"]["laplace_from"] == 200 and spec["acquisition"] == "qb-mgp"


def test_one_size_is_measured_cold_and_warm_with_its_peak_memory():
    out = bench.one(12, 0)
    assert out["cold"]["n"] == 12 and out["warm"]["n"] == 13
    for refit in (out["cold"], out["warm"]):
        assert refit["sampler"] == "nuts" and refit["distinct_draws"] is None
        # the default chains, all their draws kept: 60 each at least, more where the bulk ESS
        # asks for them (the default samples to a target; how many depends on the machine)
        assert refit["draws"] % 5 == 0 and 5 * 60 <= refit["draws"] <= 5 * 1000
        assert 0 < refit["posterior_s"] < refit["refit_s"] and refit["accuracy_s"] > 0
    assert out["peak_gb"] > 0.1
    line = bench.row("t", "cold", out["cold"], out["peak_gb"])
    assert line.startswith("| t | 12 | cold | nuts |") and line.count("|") == 13
    assert line.endswith(f"| {out['cold']['next']} |") and out["warm"]["next"] >= 0


def test_the_table_has_a_row_per_size_tree_and_refit(monkeypatch, capsys):
    measured = []

    def measure(python, n, seed, threads):
        measured.append((python, n, seed, threads))
        refit = {"n": n, "sampler": "laplace", "posterior_s": 1.0, "evaluations": 3}
        refit.update(distinct_draws=2, draws=3, accuracy_s=0.5, rank_s=0.7, refit_s=2.0)
        return {k: dict(refit, next=i) for i, k in enumerate(("cold", "warm"))} | {"peak_gb": 1}

    monkeypatch.setattr(bench, "measure", measure)
    assert bench.main(["--sizes", "20,30", "--seed", "4", "--python", "old=/x/python"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert [r.split(" | ")[:3] for r in rows[1:]] == [
        ["| this tree", "20", "cold"],
        ["| this tree", "20", "warm"],
        ["| old", "20", "cold"],
        ["| old", "20", "warm"],
        ["| this tree", "30", "cold"],
        ["| this tree", "30", "warm"],
        ["| old", "30", "cold"],
        ["| old", "30", "warm"],
    ]
    assert [m[1:] for m in measured] == [(20, 4, 1), (20, 4, 1), (30, 4, 1), (30, 4, 1)]


def test_a_measured_process_runs_on_the_threads_asked(monkeypatch):
    seen = {}

    def run(command, env, **_):
        seen.update(env)
        return SimpleNamespace(stdout='{"cold": {}}\n')

    monkeypatch.setattr(bench.subprocess, "run", run)
    assert bench.measure("python", 5, 0) == {"cold": {}}
    assert all(seen[v] == "1" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"))
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    bench.measure("python", 5, 0, threads=None)
    assert seen["OMP_NUM_THREADS"] == "7"  # the libraries' own (here, the environment's)


def test_the_subset_s_mode_search_is_compared_with_the_search_on_every_label(monkeypatch):
    from fbgp_al.worker import cold_start

    monkeypatch.setattr(cold_start, "SEARCH_LABELS", 40)
    out = bench.modes(80, 0)
    assert out["subset"]["values"] == 0 and out["all"]["values"] > 0  # the subset's not counted
    assert out["subset"]["gradients"] < out["all"]["gradients"]
    assert out["potential_apart"] < 1e-4 and out["theta_apart"] < 1e-2
    assert cold_start.SEARCH_LABELS == 40  # put back as it was


def test_the_k_check_at_a_mixture_s_size():
    """At 200 labels (the mixture's, default campaign): the warm mixture's k over a set of
    draws, of 150, 100 and 75 of them, each with its limit and importance ESS."""
    spec, labels = bench.spec_of(), bench.labels_of(200, 0)
    previous, _ = bench.refit(spec, labels, None)
    (row,) = bench.khat(200, 0, 1, previous)
    assert row["n"] == 201 and row["modes"] >= 1
    assert row[100]["limit"] == pytest.approx(0.5) and 0 < row[75]["ess"] <= 75
    assert 0 < row[150]["ess"] <= 150 and all(np.isfinite(row[c]["k"]) for c in (150, 100, 75))


def test_the_exact_pass_on_all_the_draws_and_on_disjoint_sets_of_fewer():
    out = bench.exact_draws(12, 0, counts=(75,))
    assert out["n"] == 13 and out["draws"] == 150 and out["kept"] > 0
    every, *sets = out["sets"]
    assert every["count"] == 150 and every["best_at"] == 1
    # every other draw from 0 and from 1: two disjoint sets of 75
    assert [(s["count"], s["offset"]) for s in sets] == [(75, 0), (75, 1)]
    for s in out["sets"]:
        assert 1 <= s["distinct"] <= s["count"] and s["seconds"] > 0 and s["best_at"] >= 1
        assert s["loo_rmse"] > 0 and 0 <= s["loo_coverage_95"] <= 1 and s["qbc"] >= 0
    assert sets[0]["ipv"] != sets[1]["ipv"]  # other draws, other estimates
