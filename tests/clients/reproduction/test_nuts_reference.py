"""The NUTS reference of a warm refit: the campaign it samples, the mixtures and rankings it
compares, and one small size end to end (a few chains of a few draws)."""

from dataclasses import replace

import numpy as np
import torch

from fbgp_al.clients.reproduction import nuts_reference as ref
from fbgp_al.clients.reproduction import scale_benchmark as bench


def test_the_reference_campaign_samples_by_nuts_every_draw_kept():
    spec = bench.spec_of()
    nuts = ref.reference_spec(spec, chains=3, warmup=40, warm_warmup=20, samples=30)
    mcmc = nuts["mcmc"]
    assert mcmc["laplace_from"] is None and mcmc["draws"] is None and mcmc["thinning"] == 1
    assert (mcmc["chains"], mcmc["warmup"], mcmc["warm_warmup"], mcmc["samples"]) == (3, 40, 20, 30)
    assert mcmc["init"] == spec["mcmc"]["init"] and nuts["acquisition"] == spec["acquisition"]
    assert spec["mcmc"]["laplace_from"] == 200  # the campaign itself is left as it was


def test_two_references_lie_closer_to_each_other_than_to_a_wrong_model():
    """At 40 labels, two NUTS runs (other seeds) predict alike; the same draws with lengthscales
    ten times shorter (a GP that has forgotten the labels) do not. A repeated draw is fitted
    once and predicts as itself."""
    from fbgp_al.worker import fitting

    spec = bench.spec_of()
    data = fitting.prepare(spec, bench.labels_of(40, 0))
    nuts = ref.reference_spec(spec, chains=2, warmup=60, warm_warmup=20, samples=30)
    a, b = (fitting.posterior(nuts, replace(data, seed=s), None) for s in (1, 2))
    wrong = replace(a, lengthscale=a.lengthscale / 10)
    test = torch.from_numpy(np.random.default_rng(1).random((300, 6)))
    one, two, far = (ref.mixture(*ref.predicted(data, p, test)) for p in (a, b, wrong))
    assert ref.apart(two, one)["mean_mean"] < ref.apart(far, one)["mean_mean"] / 2
    assert ref.apart(two, one)["variance_median"] < ref.apart(far, one)["variance_median"] / 2
    rows = [0, 0, 1]
    twice = replace(a, lengthscale=a.lengthscale[rows], noise=a.noise[rows])
    mean, var = ref.predicted(data, twice, test)
    assert torch.equal(mean[0], mean[1]) and not torch.equal(mean[0], mean[2])
    each, each_var = ref.predicted(data, a, test)
    assert torch.allclose(mean, each[rows], atol=1e-10)
    assert torch.allclose(var, each_var[rows], atol=1e-10)


def test_a_reference_ranks_the_candidates_and_predicts_the_test_points_apart():
    """The candidates and the test points are predicted together: the ranking is the exact
    scores' of the candidates alone, the mixture the test points' alone."""
    from fbgp_al.worker import fitting
    from fbgp_al.worker.acquisition import scorer

    spec = bench.spec_of()
    data = fitting.prepare(spec, bench.labels_of(40, 0))
    nuts = ref.reference_spec(spec, chains=2, warmup=40, warm_warmup=20, samples=10)
    rng = np.random.default_rng(2)
    cand_u, test = (torch.from_numpy(rng.random((m, 6))) for m in (50, 30))
    out = ref.reference(nuts, data, None, 3, cand_u, test)
    post = out["post"]
    assert post.size == 20 and out["diagnostics"]["draws"] == 20
    assert out["diagnostics"]["warm_start"] == "cold" and out["diagnostics"]["scoring_s"] > 0
    mean, var = ref.predicted(data, post, cand_u)
    scores = scorer(spec["acquisition"], post.noise)(mean, var).numpy()
    assert (out["order"] == np.argsort(-scores, kind="stable")).all()
    alone = ref.mixture(*ref.predicted(data, post, test))
    assert np.allclose(out["mixture"][0], alone[0], atol=1e-10)
    assert np.allclose(out["mixture"][1], alone[1], atol=1e-10)


def test_a_candidate_s_rank_and_the_distances():
    assert ref.rank_in(np.array([4, 2, 0, 1, 3]), 4) == 1
    assert ref.rank_in(np.array([4, 2, 0, 1, 3]), 1) == 4
    out = ref.apart((np.array([0.0, 1.0]), np.array([2.0, 1.0])), (np.zeros(2), np.ones(2)))
    assert out == {"mean_max": 1.0, "mean_mean": 0.5, "variance_max": 1.0, "variance_median": 0.5}


def test_one_size_against_two_references():
    settings = {"chains": 2, "warmup": 30, "warm_warmup": 20, "samples": 20}
    out = ref.quality(30, 0, settings=settings)
    assert (
        out["n"] == 31 and out["sampler"] == "nuts" and out["nuts"] == settings | {"start": "warm"}
    )
    for d in out["references"]:
        assert d["draws"] == 40 and 1 <= d["distinct"] <= 40 and d["seconds"] > 0
        assert d["max_rhat"] > 1 and d["min_ess_bulk"] > 0 and d["gradient_evaluations"] > 0
        assert d["warm_start"].startswith(("warm", "redone cold")) and d["divergences"] >= 0
    assert out["candidates"] == 10_000 and out["top"] == 100
    assert 1 <= out["chosen_rank"] <= 10_000 and 1 <= out["chosen_rank_other"] <= 10_000
    assert out["chosen_in_top"] == (out["chosen_rank"] <= 100) and out["other_best_rank"] >= 1
    assert out["this_apart"]["mean_max"] > 0 and out["references_apart"]["variance_max"] > 0
    assert all(np.isfinite(out[f"rmse_{k}"]) for k in ("this", "one", "other"))
    # the same refit on another seed: other draws, so its predictions move a little
    assert 0 < out["refits_apart"]["mean_max"] < 1 and out["refits_apart"]["variance_max"] > 0
    for h in out["hyperparameters"] + [d["hyperparameters"] for d in out["references"]]:
        assert len(h["mean"]) == len(h["sd"]) == 7 and min(h["sd"]) > 0  # 6 lengthscales, noise
    alone = ref.quality(30, 0, references=False, proposals=300)
    assert "references" not in alone and alone["refits_apart"] == out["refits_apart"]
    # two more posteriors on the refit's seed and another (here NUTS: 31 labels)
    assert alone["proposals"] == 300 and len(alone["proposals_this"]) == 2
    assert alone["proposals_this"][0]["mean_max"] == 0  # the refit's seed: the refit again
    assert alone["proposals_apart"] == alone["proposals_this"][1]
    assert alone["rmse_this"] == out["rmse_this"] and alone["n"] == 31
    cold = ref.quality(30, 0, settings=settings, start="cold")
    assert [d["warm_start"] for d in cold["references"]] == ["cold", "cold"]
