"""A refit of a campaign with fidelities (:mod:`worker.fitting.fidelity`): the labels split into
the declared inputs' features and levels, the multi-fidelity model sampled (warm from the
previous model), its body (each ``rho``, the draws, the diagnostics), the ranking of points at
levels (a parallel campaign's greedy batch, the runs labeled while it sampled counted as runs
out), the failure model over the point and its level, and the top level's leave-one-out
estimates against the same runs refitted without each label."""

import math

import numpy as np
import pytest
import torch

from fbgp_al.service.schemas.campaigns import CampaignCreate
from fbgp_al.worker import fitting
from fbgp_al.worker.fidelity import answers
from fbgp_al.worker.fidelity.model import Conditioned
from fbgp_al.worker.fitting import fidelity
from fbgp_al.worker.vocabulary import fidelities, pools

MCMC = {"chains": 2, "warmup": 30, "samples": 20, "thinning": 2, "warm_start": True}


def forrester(x, level):
    fine = (6 * x - 2) ** 2 * np.sin(12 * x - 4)
    return fine if level == "fine" else 0.5 * fine + 10 * (x - 0.5) - 5


def campaign(**changes):
    body = {
        "inputs": [{"name": "x", "lower": 0.0, "upper": 1.0}],
        "pool": {"type": "grid", "points_per_dim": 41},
        "fidelities": [{"name": "coarse", "cost": 1}, {"name": "fine", "cost": 10}],
        "initial_design": {"size": 9},
        "max_labels": 30,
        "mcmc": MCMC,
        "seed": 3,
    }
    body.update(changes)
    spec = fidelities.with_level(CampaignCreate.model_validate(body).model_dump())
    pool = pools.pool_of(spec)
    design = fidelities.nested_design(pool, pools.space_of(spec), 9, 2, spec["seed"])
    x = pools.to_original(spec, pool.points(design))
    labels = [
        {"x": p, "y": float(forrester(p[0], p[1])), "index": int(i)}
        for p, i in zip(x, design, strict=True)
    ]
    return spec, pool, labels, set(design.tolist())


def refit_with_its_first_run(spec, pool, labels, design, model, ranking) -> dict:
    """The next model: the ranking's first run labeled 1.0, the refit warm from ``model``."""
    first = ranking[0]
    labels = [*labels, {"x": first["x"], "y": 1.0, "index": first["index"]}]
    again, _ = fitting.fit(spec, pool, labels, design | {first["index"]}, previous=model)
    return again


def test_the_labels_split_into_features_and_levels():
    spec, _, labels, _ = campaign()
    data = fidelity.prepare(spec, labels)
    assert data.u.shape == (9, 1) and data.t.tolist() == [0] * 6 + [1] * 3
    np.testing.assert_allclose(data.u[:, 0], [label["x"][0] for label in labels])
    assert data.costs == [1.0, 10.0] and abs(float(np.mean(data.z))) < 1e-12


def test_a_refit_samples_the_levels_and_ranks_points_at_levels():
    spec, pool, labels, design = campaign()
    model, ranking = fitting.fit(spec, pool, labels, design)
    body = model["fidelity"]
    assert len(body["theta"]) == 2 * 20 // 2 and len(body["theta"][0]) == len(body["names"])
    assert body["labels_per_level"] == {"coarse": 6, "fine": 3} and body["cost_spent"] == 36.0
    rho = body["rho"][0]
    assert rho["q05"] <= rho["median"] <= rho["q95"] and rho["sd"] > 0
    d = model["diagnostics"]
    assert {"max_rhat", "min_ess_bulk", "divergences"} <= set(d) and "rho_0" in d["rhat"]
    assert d["warm_start"] == "cold" and d["method"] == "nuts"
    assert model["transform"]["lower"] == [0.0] and model["transform"]["y_std"] > 0
    assert ranking and not {r["index"] for r in ranking} & design
    assert all(r["x"][-1] in ("coarse", "fine") and len(r["x"]) == 2 for r in ranking)
    scores = [r["score"] for r in ranking]
    assert scores == sorted(scores, reverse=True) and all(math.isfinite(s) for s in scores)
    a = model["accuracy"]
    assert a["loo_rmse"] > 0 and a["ipv"] > a["ipv_f"] > 0 and a["level"] == 1
    again = refit_with_its_first_run(spec, pool, labels, design, model, ranking)
    assert again["diagnostics"]["warm_start"] != "cold"  # warm, or warm redone cold


def test_a_parallel_campaigns_ranking_is_a_greedy_batch_of_distinct_runs():
    spec, pool, labels, design = campaign(mode="parallel", max_pending=3)
    _, ranking = fitting.fit(spec, pool, labels, design)
    assert len({r["index"] for r in ranking}) == len(ranking) == 3  # the batch alone


@pytest.mark.parametrize("acquisition", ["qb-mgp", "b-qbc"])
def test_a_disagreement_ranks_each_point_at_one_level(acquisition):
    spec, pool, labels, design = campaign(acquisition=acquisition)
    _, ranking = fitting.fit(spec, pool, labels, design)
    points = [r["x"][0] for r in ranking]
    assert len(points) == len(set(points)) and ranking


def test_leave_one_out_of_the_top_level_is_the_model_refitted_without_each_label():
    spec, pool, labels, _ = campaign()
    fit = fidelity.sample(spec, labels)
    draws = fidelity.conditioned(fit.potential, fidelity.spaced(fit.theta, 4))
    reference = fidelity.reference_points(spec, pool, 2)
    got = fidelity.accuracy(draws, fit.data, reference)
    data, top = fit.data, 1
    mus, variances = [], []
    for g in draws:
        row_mu, row_var = [], []
        for i in np.flatnonzero(data.t == top):
            keep = torch.as_tensor(np.arange(data.n) != i)
            h = Conditioned(
                g.u[keep], g.t[keep], g.z[keep], g.lengthscales, g.variances, g.rho, g.noise
            )
            mean, var = h.predict(data.u[i : i + 1], top)
            row_mu.append(float(mean[0]))
            row_var.append(float(var[0] + g.noise[top]))
        mus.append(row_mu)
        variances.append(row_var)
    mus, variances = np.array(mus), np.array(variances)
    z = data.z[data.t == top]
    rmse = math.sqrt(np.mean((mus.mean(0) - z) ** 2)) * data.scale_y.std
    density = np.exp(-0.5 * (z - mus) ** 2 / variances) / np.sqrt(2 * math.pi * variances)
    assert got["loo_rmse"] == pytest.approx(rmse, rel=1e-7)
    assert got["loo_nlpd"] == pytest.approx(float(-np.log(density.mean(0)).mean()), rel=1e-7)
    means = np.array([g.predict(reference, top)[0].numpy() for g in draws])
    assert got["qbc"] == pytest.approx(float(means.var(0).mean()) * data.scale_y.std**2, rel=1e-9)


def test_runs_labeled_while_it_sampled_count_as_runs_out():
    spec, pool, labels, design = campaign()
    sampled = fitting.sample(spec, labels)
    _, first = fitting.rank(spec, sampled, pool, design, [], [], 0.0)
    p = first[0]["index"]
    now = design | {p}  # labeled while the posterior was sampled on the others
    _, meanwhile = fitting.rank(spec, sampled, pool, now, [], [], 0.0, labeled=frozenset(now))
    _, out = fitting.rank(spec, sampled, pool, design, [p], [], 0.0)
    assert [r["index"] for r in meanwhile] == [r["index"] for r in out]
    _, left_out = fitting.rank(spec, sampled, pool, now, [], [], 0.0)
    assert meanwhile[0]["score"] < left_out[0]["score"]  # its variance counted as removed


def test_the_failure_model_learns_over_the_point_and_its_level():
    spec, pool, labels, design = campaign()
    labels = [label for label in labels if not (label["x"][1] == "coarse" and label["x"][0] > 0.6)]
    where = (0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)  # the cheap level crashes there
    failures = [{"x": [v, "coarse"], "reason": "mesh", "count": 1} for v in where]
    model, ranking = fitting.fit(spec, pool, labels, design, failures=failures)
    p = answers.predict(spec, model, labels, [[0.85, "coarse"], [0.85, "fine"], [0.2, "coarse"]])
    crashes, fine, elsewhere = p["p_success"]
    assert crashes < 0.1 < 0.5 < fine and elsewhere > 0.9
    assert not [r for r in ranking if r["x"][1] == "coarse" and r["x"][0] > 0.62]


def noisy_campaign(count: int, **changes):
    """:func:`campaign` with ``count`` more labels at seeded pool runs (either level), every
    label with noise of sd 0.1: a posterior that a Laplace mixture describes."""
    spec, pool, labels, design = campaign(**changes)
    rng = np.random.default_rng(5)
    extra = rng.choice(np.setdiff1d(np.arange(pool.size), sorted(design)), count, replace=False)
    x = pools.to_original(spec, pool.points(extra))
    labels = labels + [{"x": p, "y": 0.0, "index": int(i)} for p, i in zip(x, extra, strict=True)]
    for label in labels:
        label["y"] = float(forrester(*label["x"]) + 0.1 * rng.standard_normal())
    return spec, pool, labels, design | set(extra.tolist())


def test_past_laplace_from_a_refit_draws_from_the_mixture_and_the_next_starts_warm():
    spec, pool, labels, design = noisy_campaign(30, mcmc={**MCMC, "laplace_from": 9, "draws": 60})
    model, ranking = fitting.fit(spec, pool, labels, design)
    d = model["diagnostics"]
    assert d["method"] == "laplace" and d["khat"] <= d["khat_limit"] and d["max_rhat"] is None
    assert len(model["fidelity"]["theta"]) == 60  # the mixture's draws, none thinned out
    assert model["adaptation"]["source"] == "laplace" and ranking
    again = refit_with_its_first_run(spec, pool, labels, design, model, ranking)
    assert again["diagnostics"]["method"] == "laplace"
    assert again["diagnostics"]["warm_start"] == "warm"


def test_a_mixture_above_its_limit_hands_the_refit_to_nuts_from_its_draws(monkeypatch):
    from fbgp_al.worker import laplace

    monkeypatch.setattr(laplace, "khat_limit", lambda draws: -10.0)  # no k passes
    spec, pool, labels, design = campaign(mcmc={**MCMC, "laplace_from": 9, "draws": 60})
    model, ranking = fitting.fit(spec, pool, labels, design)
    d = model["diagnostics"]
    assert d["method"] == "nuts" and d["laplace"]["widened"] == 1.5
    assert d["laplace"]["khat"] > d["laplace"]["khat_limit"] == -10.0
    assert d["warm_start"] != "cold"  # the chains started at the mixture's draws
    assert len(model["fidelity"]["theta"]) == 2 * 20 // 2 and ranking
    assert model["adaptation"]["searched_at"] == 9  # the mixture's cold search, for the next
