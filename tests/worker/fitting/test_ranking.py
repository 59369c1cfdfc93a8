"""Screening of a refit's scoring (:func:`worker.fitting.ranking.scored`): every candidate's
rough score on a few draws, the best of them scored on all; against the acquisition's own scores
(:func:`worker.acquisition.evaluate`) on the full and on the spread draws."""

import numpy as np
import pytest
import torch

from fbgp_al.worker.acquisition import evaluate
from fbgp_al.worker.fitting import ranking
from fbgp_al.worker.mcmc import Posterior
from fbgp_al.worker.scoring import Output, Scoring


def _case(draws=40, chains=5, n=30, candidates=1500, seed=0):
    rng = np.random.default_rng(seed)
    u = torch.from_numpy(rng.random((n, 2)))
    z = torch.from_numpy(np.sin(6 * u[:, 0].numpy()) + u[:, 1].numpy() ** 2)
    post = Posterior(
        lengthscale=torch.from_numpy(np.exp(rng.normal(-1.5, 0.4, (draws, 2)))),
        noise=torch.from_numpy(np.exp(rng.normal(-4, 0.5, draws))),
        chains=chains,
        mode_lengthscale=torch.tensor([0.2, 0.3], dtype=torch.float64),
        mode_noise=0.01,
    )
    cand = torch.from_numpy(rng.random((candidates, 2)))
    return post, u, z, cand


@pytest.fixture
def screening_on(monkeypatch):
    """Screening whatever the work, keeping 100 of 1,500 candidates after 10 draws."""
    monkeypatch.setattr(ranking, "SCREEN_WORK", 0)
    monkeypatch.setattr(ranking, "SCREEN_KEEP", 100)
    monkeypatch.setattr(ranking, "SCREEN_DRAWS", 10)


@pytest.mark.parametrize("name", ["qb-mgp", "b-alm", "bald"])
def test_screened_scores_are_exact_for_the_best_rough_scores_and_minus_inf_elsewhere(
    screening_on, name
):
    post, u, z, cand = _case()
    fn = Scoring(name, (Output(1.0, post, u, z, None, 0),))
    scores = ranking.here(ranking.scored(name, fn, cand)).numpy()
    full = evaluate(name, post, u, z, cand).numpy()
    rough = evaluate(name, post.spread(10), u, z, cand).numpy()
    kept = np.isfinite(scores)
    assert kept.sum() == 100 and np.isneginf(scores[~kept]).all()
    assert set(np.flatnonzero(kept)) == set(np.argsort(-rough, kind="stable")[:100])
    np.testing.assert_allclose(scores[kept], full[kept], rtol=1e-12)
    assert np.argmax(scores) == np.argmax(full)  # here the best is among those kept


def test_the_rough_scores_are_weighed_by_the_probability_of_success(screening_on):
    post, u, z, cand = _case()
    fn = Scoring("qb-mgp", (Output(1.0, post, u, z, None, 0),))
    weights = torch.from_numpy(np.where(cand[:, 0].numpy() < 0.5, 1.0, 1e-3))
    scores = ranking.here(ranking.scored("qb-mgp", fn, cand, weights)).numpy()
    rough = evaluate("qb-mgp", post.spread(10), u, z, cand).numpy() * weights.numpy()
    assert set(np.flatnonzero(np.isfinite(scores))) == set(np.argsort(-rough, kind="stable")[:100])


def test_no_screening_below_its_work_or_for_the_cheap_acquisitions():
    """At the defaults' thresholds a small scoring is the acquisition's, bit for bit; b-qbc
    (means only) and alm (one draw) are never screened."""
    post, u, z, cand = _case()
    fn = Scoring("qb-mgp", (Output(1.0, post, u, z, None, 0),))
    assert not ranking.screens("qb-mgp", fn, cand)
    assert torch.equal(
        ranking.here(ranking.scored("qb-mgp", fn, cand)), evaluate("qb-mgp", post, u, z, cand)
    )
    big = Scoring("qb-mgp", (Output(1.0, post, u.repeat(20, 1), z.repeat(20), None, 0),))
    assert ranking.screens("qb-mgp", big, cand.repeat(10, 1))  # 40 x 15,000 x 600^2
    assert not ranking.screens("b-qbc", big, cand.repeat(10, 1))
    assert not ranking.screens("alm", big, cand.repeat(10, 1))


@pytest.mark.parametrize(
    ("n", "kept"), [(200, 1000), (500, 1000), (700, 522), (1000, 256), (2000, 256)]
)
def test_fewer_are_kept_where_their_exact_scores_would_cost_more_than_the_screen(n, kept):
    """150 draws: 1,000 exact scores up to n = 506, fewer beyond (as many as 256 cost at
    n = 1,000), and never fewer than 256."""
    post, _, _, _ = _case(draws=150, n=2)
    u, z = torch.zeros((n, 2), dtype=torch.float64), torch.zeros(n, dtype=torch.float64)
    fn = Scoring("qb-mgp", (Output(1.0, post, u, z, None, 0),))
    assert ranking.kept_count(fn) == kept
    assert kept == max(256, min(1000, 256 * 1000**2 // n**2))


def test_with_draws_spreads_each_outputs_draws_over_its_chains():
    post, u, z, _ = _case(draws=40, chains=5)
    fn = Scoring(
        "qb-mgp", (Output(1.0, post, u, z, None, 0), Output(0.5, post, u, z, None, 1)), "combined"
    )
    fewer = fn.with_draws(10)
    assert fewer.draws == 10 and fn.draws == 40 and fewer.kind == "combined"
    rows = [7, 15, 23, 31, 39]  # each chain's 8th draw: its last, as Posterior.spread keeps
    for o in fewer.outputs:
        kept = o.post.lengthscale[:, 0].numpy()
        assert set(post.lengthscale[rows, 0].numpy()) <= set(kept)


def _ranking_case():
    """A 2-input campaign's spec, 30 labels as a refit prepares them, 40 draws and its pool."""
    from fbgp_al.worker import fitting
    from fbgp_al.worker.vocabulary.design import GridPool

    spec = {
        "inputs": [{"name": f"x{i}", "lower": 0.0, "upper": 1.0} for i in range(2)],
        "pool": {"type": "grid", "points_per_dim": 40},
        "pool_subsample": 1500,
        "acquisition": "qb-mgp",
        "seed": 2,
        "mcmc": {"chains": 2, "warmup": 30, "samples": 40, "thinning": 2},
    }
    post, u, z, _ = _case(draws=40, chains=2, n=30)
    labels = [{"x": a.tolist(), "y": float(b)} for a, b in zip(u, z, strict=True)]
    return spec, fitting.prepare(spec, labels), post, GridPool(dim=2, points_per_dim=40)


def test_a_ranking_that_keeps_few_scores_them_on_the_accuracy_factors(monkeypatch):
    """Where the kept candidates are at most KEEP_LEAST, their exact scores come from the pass
    of the accuracy estimates: the same ranking as their own scoring step, scores to 1e-10,
    the same estimates, and one step fewer (the screen's alone)."""
    spec, data, post, pool = _ranking_case()
    monkeypatch.setattr(ranking, "SCREEN_WORK", 0)
    monkeypatch.setattr(ranking, "SCREEN_DRAWS", 10)
    runs = {}
    for name, least in (("steps", 0), ("one pass", 200)):
        monkeypatch.setattr(ranking, "KEEP_LEAST", least)
        monkeypatch.setattr(ranking, "SCREEN_KEEP", 150)
        steps = []

        def scored(step, steps=steps):  # each step scored here, its size noted
            steps.append(len(step.candidates))
            return step.fn(step.candidates)

        model, ranked = _driven(ranking.ranked(spec, pool, data, post, set(), [], 0.0), scored)
        runs[name] = (model, ranked, steps)
    (model, want, steps), (shared, got, one_pass) = runs["steps"], runs["one pass"]
    assert steps == [1500, 150] and one_pass == [1500]
    assert [r["index"] for r in got] == [r["index"] for r in want]
    np.testing.assert_allclose([r["score"] for r in got], [r["score"] for r in want], rtol=1e-10)
    for key, value in model["accuracy"].items():
        if key != "seconds":
            assert shared["accuracy"][key] == pytest.approx(value, rel=1e-12), key


@pytest.mark.parametrize(("weighed", "out"), [(False, 2), (True, 2), (False, 0)])
def test_a_parallel_ranking_that_keeps_few_picks_its_batch_on_the_accuracy_factors(
    monkeypatch, weighed, out
):
    """Where a parallel campaign's screen keeps fewer than BATCH_SHARED_BELOW, its greedy
    batch is chosen on the factors of the accuracy estimates' pass, the points out conditioned
    on: the batch of the refitted fantasies, scores to 1e-9, the same estimates, and the
    screen's step alone."""
    from fbgp_al.worker.feasibility.campaign import fit_campaign

    spec, data, post, pool = _ranking_case()
    spec.update(mode="parallel", max_pending=6)
    failure = None
    if weighed:  # two failed runs in a corner: a failure model's weights
        spec["failures"] = {"model": "classifier", "min_success": 0.2}
        labels = [{"x": a.tolist(), "y": 0.0} for a in data.u.numpy()]
        failed = [{"x": [0.9, 0.95], "reason": "crash"}, {"x": [0.97, 0.9], "reason": "crash"}]
        failure = fit_campaign(spec, labels, failed, data.seed)
    pending = pool.index_of(np.clip(data.u[[3, 9]].numpy() + 0.05, 0, 1)).tolist()[:out]
    monkeypatch.setattr(ranking, "SCREEN_WORK", 0)
    monkeypatch.setattr(ranking, "SCREEN_DRAWS", 10)
    monkeypatch.setattr(ranking, "SCREEN_KEEP", 150)
    runs = {}
    for name, below in (("steps", 150), ("one pass", 151)):
        monkeypatch.setattr(ranking, "BATCH_SHARED_BELOW", below)
        steps = []

        def scored(step, steps=steps):
            steps.append(len(step.candidates))
            return step.fn(step.candidates)

        args = (spec, pool, data, post, set(), pending, 0.0, failure)
        runs[name] = (*_driven(ranking.ranked(*args), scored), steps)
    (model, want, steps), (shared, got, one_pass) = runs["steps"], runs["one pass"]
    assert steps[0] == one_pass[0] and len(steps) == 2 and len(one_pass) == 1
    assert [r["index"] for r in got] == [r["index"] for r in want] and len(got) == 6
    assert not {r["index"] for r in got} & set(pending)
    np.testing.assert_allclose([r["score"] for r in got], [r["score"] for r in want], rtol=1e-9)
    for key, value in model["accuracy"].items():
        if key != "seconds":
            assert shared["accuracy"][key] == pytest.approx(value, rel=1e-12), key


@pytest.mark.parametrize(("few_from", "draws"), [(31, 20), (30, 10)])
def test_from_exact_few_from_labels_the_exact_pass_takes_fewer_draws(monkeypatch, few_from, draws):
    """From EXACT_FEW_FROM labels the kept candidates' exact scores and the accuracy estimates
    are those of EXACT_DRAWS_FEW draws spread over those the acquisition takes (here 10 of 20 on
    30 labels): the ranking's scores are the acquisition's on those draws, to 1e-10, and the
    estimates say how many draws they mixed; below it, every draw's."""
    spec, data, post, pool = _ranking_case()
    for name, value in (("SCREEN_WORK", 0), ("SCREEN_DRAWS", 10), ("SCREEN_KEEP", 150)):
        monkeypatch.setattr(ranking, name, value)
    monkeypatch.setattr(ranking, "KEEP_LEAST", 200)  # kept ones scored in the estimates' pass
    monkeypatch.setattr(ranking, "EXACT_FEW_FROM", few_from)
    monkeypatch.setattr(ranking, "EXACT_DRAWS_FEW", 10)
    model, ranked = _driven(
        ranking.ranked(spec, pool, data, post, set(), [], 0.0), lambda s: s.fn(s.candidates)
    )
    assert model["accuracy"]["draws"] == draws
    thin = post.for_scoring(spec["mcmc"])  # every 2nd of 40
    exact = thin.spread(10) if draws == 10 else thin
    points = torch.tensor([r["x"] for r in ranked], dtype=torch.float64)
    fn = Scoring("qb-mgp", (Output(1.0, exact, data.u, data.z, data.noise, data.seed),))
    np.testing.assert_allclose([r["score"] for r in ranked], fn(points).numpy(), rtol=1e-10)
    assert [r["score"] for r in ranked] == sorted((r["score"] for r in ranked), reverse=True)


@pytest.mark.parametrize(("n", "draws"), [(999, 15), (1000, 5), (2000, 5)])
def test_from_a_thousand_labels_the_screen_takes_five_draws(n, draws):
    post, _, _, cand = _case(draws=150, chains=1, n=2)
    u, z = torch.rand((n, 2), dtype=torch.float64), torch.zeros(n, dtype=torch.float64)
    fn = Scoring("qb-mgp", (Output(1.0, post, u, z, None, 0),))
    assert ranking.screen_draws(fn) == draws
    step = next(ranking.scored("qb-mgp", fn, cand.repeat(7, 1)))
    assert step.fn.draws == draws and len(step.candidates) == 7 * len(cand)


def _driven(steps, scored):
    """A ranking's result, each of its steps answered by ``scored``."""
    try:
        step = next(steps)
        while True:
            step = steps.send(scored(step))
    except StopIteration as done:
        return done.value
