"""A refit's search in its ranking: without ``search`` (or with ``"polish": false``) the ranking
is the pool's, bit for bit, against the acquisition's scores written out; with it, polished
entries ahead of the pool's (never worse than the pool's best, climbed on the accuracy
estimates' factors), a parallel campaign's batch
polished pick by pick with the points out as fantasies, several outputs, and the model's
``diagnostics.search``."""

import numpy as np
import pytest
import torch

from fbgp_al.worker import fitting
from fbgp_al.worker.acquisition import evaluate, greedy_batch_outputs
from fbgp_al.worker.differentiable import Acquisition
from fbgp_al.worker.fitting import search
from fbgp_al.worker.fitting.ranking import candidates_of
from fbgp_al.worker.vocabulary import box
from fbgp_al.worker.vocabulary.defaults import RANKING_SIZE
from fbgp_al.worker.vocabulary.design import GridPool, PointPool

SPEC = {
    "inputs": [{"name": n, "lower": -1.0, "upper": 3.0} for n in ("a", "b")],
    "pool": {"type": "grid", "points_per_dim": 16},
    "pool_subsample": 200,
    "acquisition": "qb-mgp",
    "mode": "sequential",
    "max_pending": 3,
    "seed": 3,
    "mcmc": {"chains": 2, "warmup": 20, "samples": 20, "thinning": 2},
}
POOL = GridPool(dim=2, points_per_dim=16)
POLISH = {"polish": True, "starts": 3}


def _labels(outputs=False):
    rng = np.random.default_rng(1)
    x = -1 + 4 * rng.random((10, 2))
    y = np.sin(2 * x[:, 0]) + 0.5 * x[:, 1]
    if outputs:
        return [
            {"x": p.tolist(), "y": {"s": float(v), "t": float(v**2)}}
            for p, v in zip(x, y, strict=True)
        ]
    return [{"x": p.tolist(), "y": float(v)} for p, v in zip(x, y, strict=True)]


@pytest.fixture(scope="module")
def fitted():
    data = fitting.prepare(SPEC, _labels())
    return data, fitting.posterior(SPEC, data, None)


def _ranked(spec, fitted, pending=()):
    data, post = fitted
    return fitting.model_and_ranking(spec, POOL, data, post, set(), list(pending), 0.0)


@pytest.mark.parametrize("search_field", [None, {"polish": False}, {"polish": False, "starts": 9}])
def test_without_polish_the_ranking_is_the_pools_bit_for_bit(fitted, search_field):
    spec = SPEC if search_field is None else dict(SPEC, search=search_field)
    model, ranking = _ranked(spec, fitted)
    data, post = fitted
    candidates, cand_u, _, _ = candidates_of(SPEC, POOL, data.space, data.n, set(), [])
    scores = evaluate("qb-mgp", post.for_scoring(SPEC["mcmc"]), data.u, data.z, cand_u).numpy()
    best = np.argsort(-scores, kind="stable")[:RANKING_SIZE]
    assert [r["index"] for r in ranking] == candidates[best].tolist()
    assert [r["score"] for r in ranking] == scores[best].tolist()
    assert "search" not in model["diagnostics"]


def test_a_parallel_batch_without_polish_is_the_greedy_batch_bit_for_bit(fitted):
    spec = dict(SPEC, mode="parallel", search={"polish": False})
    data, post = fitted
    pending = [5, 77]
    _, ranking = _ranked(spec, fitted, pending)
    candidates, cand_u, pending_u, _ = candidates_of(spec, POOL, data.space, data.n, set(), pending)
    thin = post.for_scoring(spec["mcmc"])
    order, scores = greedy_batch_outputs(
        "qb-mgp", [(1.0, thin, data.u, data.z, None)], cand_u, 3, pending_u, seed=data.seed
    )
    assert [r["index"] for r in ranking] == candidates[order.numpy()].tolist()
    assert [r["score"] for r in ranking] == scores.tolist()


@pytest.mark.parametrize("name", ["qb-mgp", "bald", "b-qbc"])
def test_polished_entries_lead_the_pools_ranking(fitted, name):
    spec = dict(SPEC, acquisition=name, search=POLISH)
    model, ranking = _ranked(spec, fitted)
    pool_model, pool_ranking = _ranked(dict(SPEC, acquisition=name), fitted)
    # the accuracy estimates, whose factors the polish climbs on, as a refit without polish's
    assert {k: v for k, v in model["accuracy"].items() if k != "seconds"} == {
        k: v for k, v in pool_model["accuracy"].items() if k != "seconds"
    }
    polished = [r for r in ranking if r["index"] is None]
    assert 1 <= len(polished) <= 3 and ranking[: len(polished)] == polished
    assert ranking[len(polished) :] == pool_ranking  # the pool's after them, as before
    assert [p["point"] for p in polished] == [f"10.p{k}" for k in range(len(polished))]
    scores = [p["score"] for p in polished]
    assert scores == sorted(scores, reverse=True) and scores[0] > pool_ranking[0]["score"]
    # each polished entry's score is the acquisition at its point as handed out
    data, post = fitted
    thin = post.for_scoring(spec["mcmc"])
    u = torch.from_numpy(data.space.to_gp([p["x"] for p in polished]))
    values = Acquisition(name, [(1.0, thin, data.u, data.z, None)])(u).detach().numpy()
    np.testing.assert_allclose(values, scores, rtol=1e-9)
    assert all(-1 <= v <= 3 for p in polished for v in p["x"])
    assert model["diagnostics"]["search"]["starts"] == 3


def test_a_polished_parallel_batch_has_the_points_out_as_fantasies(fitted):
    spec = dict(SPEC, mode="parallel", search=POLISH)
    pending = [5, 77]
    _, ranking = _ranked(spec, fitted, pending)
    assert len(ranking) == 3 and all(r["index"] is None for r in ranking)
    data, post = fitted
    _, _, pending_u, _ = candidates_of(spec, POOL, data.space, data.n, set(), pending)
    thin = post.for_scoring(spec["mcmc"])
    parts = [(1.0, thin, data.u, data.z, None)]
    first = torch.from_numpy(data.space.to_gp([ranking[0]["x"]]))
    alone = Acquisition("qb-mgp", parts)(first).item()
    with_pending = Acquisition("qb-mgp", parts, pending_u)(first).item()
    assert ranking[0]["score"] == pytest.approx(with_pending, rel=1e-9) and with_pending < alone


def test_several_outputs_are_polished_on_their_combined_score():
    spec = dict(SPEC, outputs=[{"name": "s"}, {"name": "t", "weight": 2.0}], search=POLISH)
    sampled = fitting.sample(spec, _labels(outputs=True))
    model, ranking = fitting.rank(spec, sampled, POOL, set(), [], [], 0.0)
    polished = [r for r in ranking if r["index"] is None]
    assert polished and polished[0]["score"] > max(
        r["score"] for r in ranking if r["index"] is not None
    )
    assert model["diagnostics"]["search"]["polish"]


def test_random_is_never_polished():
    assert not search.polishes(dict(SPEC, acquisition="random", search=POLISH))
    assert search.polishes(dict(SPEC, search=POLISH)) and not search.polishes(SPEC)


def test_a_continuous_pool_ranks_a_fresh_sobol_sample_polished(fitted):
    """Its candidates: the box's Sobol sample of the refit (none a stored point), all off the
    pool; its design's points out are fantasies as the points off the pool out are; the
    accuracy's points the same for every refit."""
    data, post = fitted
    spec = dict(SPEC, pool={"type": "continuous"}, search={"starts": 2})
    design = PointPool(np.array([[0.1, 0.2], [0.9, 0.4], [0.5, 0.8]]))
    model, ranking = fitting.model_and_ranking(spec, design, data, post, {0, 1, 2}, [], 0.0)
    assert all(r["index"] is None for r in ranking)
    keys = [r["point"] for r in ranking]
    assert keys[0].startswith("10.p") and all(k.startswith(("10.p", "10.c")) for k in keys)
    sample = box.candidates(data.space, SPEC["pool_subsample"], [SPEC["seed"], 10])
    rows = [int(k.split(".c")[1]) for k in keys if ".c" in k]
    np.testing.assert_allclose(
        data.space.to_pool([ranking[keys.index(f"10.c{r}")]["x"] for r in rows[:5]]),
        sample[rows[:5]],
        atol=1e-12,
    )
    # a design point out (index 1 of the stored design) is the same fantasy as its values
    _, by_index = fitting.model_and_ranking(
        dict(spec, mode="parallel"), design, data, post, set(), [1], 0.0
    )
    x = data.space.from_pool(design.points([1]))
    _, by_value = fitting.model_and_ranking(
        dict(spec, mode="parallel"), design, data, post, set(), [], 0.0, pending_x=x
    )
    assert [r["x"] for r in by_index] == [r["x"] for r in by_value]
    # the accuracy's points: the box's sample of the campaign's seed, whatever the pool
    thin = post.for_scoring(spec["mcmc"])
    one = fitting.accuracy_of(spec, design, data, thin)
    two = fitting.accuracy_of(spec, PointPool(np.array([[0.3, 0.3]])), data, thin)
    one.pop("seconds"), two.pop("seconds")
    assert one == two and one["ipv"] != fitting.accuracy_of(SPEC, POOL, data, thin)["ipv"]


def test_past_its_budget_a_polish_climbs_on_fewer_draws_evenly_spaced(fitted, monkeypatch):
    data, post = fitted
    thin = post.for_scoring(SPEC["mcmc"])
    assert search.climbed(thin, data.n) is thin  # within the budget: every draw
    monkeypatch.setattr(search, "POLISH_ELEMENTS", 7 * data.n**2)  # room for 7 draws
    fewer = search.climbed(thin, data.n)
    rows = [0, 3, 6, 10, 13, 16, 19]  # of thin's 20, evenly spaced, first and last kept
    assert thin.size == 20 and fewer.size == 7 and fewer.chains == 1
    torch.testing.assert_close(fewer.lengthscale, thin.lengthscale[rows], rtol=0, atol=0)
    torch.testing.assert_close(fewer.noise, thin.noise[rows], rtol=0, atol=0)
    # factors of all the draws are not those of the fewer: left out, not misused
    kept: list = []
    fitting.accuracy_of(SPEC, POOL, data, thin, keep=kept)
    factors = [tuple(torch.cat(f) for f in zip(*kept, strict=True))]
    parts = [(1.0, thin, data.u, data.z, None)]
    objective = search.objective_of(SPEC, data.space, parts, None, None, factors)
    points = torch.rand(5, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    alone = Acquisition("qb-mgp", [(1.0, fewer, data.u, data.z, None)])
    torch.testing.assert_close(objective.acquisition(points), alone(points), rtol=1e-12, atol=0)
    model, ranking = _ranked(dict(SPEC, search=POLISH), fitted)
    polished = [r for r in ranking if r["index"] is None]
    u = torch.from_numpy(data.space.to_gp([p["x"] for p in polished]))
    np.testing.assert_allclose(alone(u).numpy(), [p["score"] for p in polished], rtol=1e-9)
