"""The failure model in a refit's ranking (:mod:`worker.feasibility.campaign`,
:func:`worker.fitting.model_and_ranking`): each acquisition's ranking against its written-out
formula, ``score x`` the 10% quantile of the chance of success (its median between a failure
and a success within ``bracket``) over the candidates whose P(success) is at or above
``min_success``, and the count of those bracketed; the greedy batch
pick by pick with its fantasies; several outputs; and, without a failed run or with ``"model":
"none"``, the ranking of before, bit for bit."""

import json

import numpy as np
import pytest
import torch
from scipy import stats

from fbgp_al.worker import fitting
from fbgp_al.worker.acquisition import batch_scores
from fbgp_al.worker.acquisition import evaluate as acquisition_values
from fbgp_al.worker.feasibility import Classifier, Constant
from fbgp_al.worker.feasibility.campaign import MAX_RUNS, FailureModel, bounded, fit_campaign
from fbgp_al.worker.fitting.ranking import candidates_of
from fbgp_al.worker.scoring import combined_scores
from fbgp_al.worker.vocabulary.design import GridPool
from fbgp_al.worker.vocabulary.space import Space

SPEC = {
    "inputs": [{"name": n, "lower": 0.0, "upper": 1.0} for n in ("a", "b")],
    "pool": {"type": "grid", "points_per_dim": 16},
    "pool_subsample": 256,
    "acquisition": "qb-mgp",
    "mode": "sequential",
    "max_pending": 4,
    "seed": 3,
    "mcmc": {"chains": 2, "warmup": 20, "samples": 20, "thinning": 2},
    "failures": {"model": "classifier", "min_success": 0.3},
}
POOL = GridPool(dim=2, points_per_dim=16)
ACQUISITIONS = ["alm", "b-alm", "b-qbc", "qb-mgp", "bald", "bald-std", "random"]


def _runs(spec=SPEC):
    """12 labels of a smooth function and 6 runs failed in the corner a > 0.7, b > 0.6."""
    rng = np.random.default_rng(1)
    ok = rng.random((40, 2))
    ok = ok[~((ok[:, 0] > 0.7) & (ok[:, 1] > 0.6))][:12]
    bad = 0.7 + 0.3 * rng.random((6, 2))
    labels = [{"x": p.tolist(), "y": float(np.sin(5 * p[0]) + p[1])} for p in ok]
    return labels, [{"x": p.tolist(), "reason": "diverged", "at": 1.0} for p in bad]


@pytest.fixture(scope="module")
def fitted():
    labels, failures = _runs()
    data = fitting.prepare(SPEC, labels)
    post = fitting.posterior(SPEC, data, None)
    failure = fit_campaign(SPEC, labels, failures, data.seed)
    return labels, failures, data, post, failure


def _weights(failure, cand_u):
    """P(success) and the weights: the 10% quantile of ``Phi(f)`` under the latent's posterior,
    by scipy's normal quantile function (``Phi`` is increasing, so the quantile of ``Phi(f)`` is
    ``Phi`` of ``f``'s), and the median, ``Phi(mean)``, between a failure and a success close by
    (``FailureModel.between``, checked against its definition in its own tests)."""
    mean, var = failure.model.latent(cand_u.numpy())
    f = stats.norm.ppf(0.1, loc=mean, scale=np.sqrt(var))
    w = np.where(failure.between(cand_u.numpy()), stats.norm.cdf(mean), stats.norm.cdf(f))
    return failure.model.p_success(cand_u.numpy()), w


def _candidates(spec, data, pending=()):
    """The candidates a refit scores without a failure model, their features, and their
    probabilities of success under ``failure`` (computed apart from the code under test)."""
    candidates, cand_u, _, _ = candidates_of(spec, POOL, data.space, data.n, set(), list(pending))
    return candidates, cand_u


@pytest.fixture
def bracket(fitted, request):
    """The fitted failure model's ``bracket`` set to the test's parameter, then put back."""
    failure = fitted[-1]
    before, failure.bracket = failure.bracket, request.param
    yield request.param
    failure.bracket = before


@pytest.mark.parametrize("bracket", [0.05, 0.3], indirect=True)
@pytest.mark.parametrize("name", ACQUISITIONS)
def test_each_acquisition_ranks_by_its_score_times_the_probability_of_success(
    fitted, name, bracket
):
    labels, failures, data, post, failure = fitted
    spec = dict(SPEC, acquisition=name)
    assert isinstance(failure.model, Classifier)
    model, ranking = fitting.model_and_ranking(
        spec, POOL, data, post, set(), [], 0.0, failure=failure
    )
    candidates, cand_u = _candidates(spec, data)
    p, w = _weights(failure, cand_u)
    keep = p >= 0.3
    assert 0 < (~keep).sum() < len(p) // 2  # the corner is left out, most of the square not
    # kept, but weighed down by the model's doubt near the failures; not so where it is sure
    assert (w[keep] < 0.1 * p[keep]).any() and np.median(w[p > 0.95]) > 0.99
    thin = post.for_scoring(spec["mcmc"])
    # scored on the candidates kept (random draws one number per candidate scored)
    kept_u = cand_u[torch.from_numpy(keep)]
    score = acquisition_values(name, thin, data.u, data.z, kept_u, seed=data.seed).numpy()
    assert (score >= -1e-12).all()  # every score is non-negative: x P ranks as expected
    expected = score * w[keep]
    order = np.argsort(-expected, kind="stable")[: len(ranking)]
    assert [r["index"] for r in ranking] == candidates[keep][order].tolist()
    np.testing.assert_allclose([r["score"] for r in ranking], expected[order], rtol=1e-12)
    assert model["failures"]["excluded"] == int((~keep).sum())
    between = failure.between(kept_u.numpy())
    assert model["failures"]["bracketed"] == int(between.sum()) and between.any() == (bracket > 0.1)
    assert model["failures"]["bracket"] == bracket
    assert model["failures"]["n_failures"] == 6 and model["failures"]["n_successes"] == 12
    left_out = set(candidates[~keep].tolist())
    assert not left_out & {r["index"] for r in ranking}


@pytest.mark.parametrize("name", ["qb-mgp", "b-qbc", "bald", "random"])
def test_the_greedy_batch_weighs_every_pick_with_its_fantasies(fitted, name):
    """Each pick is the argmax of the weight (the 10% quantile of the chance of success) ``x``
    the score given the points pending and those picked before as fantasies (``random``: its
    draw x the weight), over the candidates kept."""
    labels, failures, data, post, failure = fitted
    spec = dict(SPEC, acquisition=name, mode="parallel")
    pending = [int(POOL.subsample(1, np.random.default_rng(0))[0])]
    _, ranking = fitting.model_and_ranking(
        spec, POOL, data, post, set(), pending, 0.0, failure=failure
    )
    candidates, cand_u = _candidates(spec, data, pending)
    p, w = _weights(failure, cand_u)
    keep = p >= 0.3
    candidates, cand_u, w = candidates[keep], cand_u[torch.from_numpy(keep)], w[keep]
    thin = post.for_scoring(spec["mcmc"])
    parts = [(1.0, thin, data.u, data.z, None)]
    fantasies = torch.from_numpy(data.space.features(POOL.points(pending)))
    picked, scores = [], []
    for _ in range(4):
        if name == "random":
            s = acquisition_values(name, thin, data.u, data.z, cand_u, seed=data.seed).numpy()
        else:
            s = batch_scores(name, parts, cand_u, pending=fantasies).numpy()
        value = s * w
        value[picked] = -np.inf
        best = int(np.argmax(value))
        picked.append(best)
        scores.append(value[best])
        if name not in ("b-qbc", "random"):  # b-qbc reads the means, which fantasies keep
            fantasies = torch.cat([fantasies, cand_u[best][None]])
    assert [r["index"] for r in ranking] == candidates[picked].tolist()
    np.testing.assert_allclose([r["score"] for r in ranking], scores, rtol=1e-9)


def test_several_outputs_weigh_their_combined_score(fitted):
    labels, failures, _, _, _ = fitted
    spec = dict(SPEC, outputs=[{"name": "f"}, {"name": "g", "weight": 2.0}])
    multi = [dict(label, y={"f": label["y"], "g": label["y"] ** 2}) for label in labels]
    fits = fitting.fit_outputs(spec, multi)
    failure = fit_campaign(spec, multi, failures, fits[0].data.seed)
    _, ranking = fitting.multi_model_and_ranking(spec, POOL, fits, set(), [], 0.0, failure=failure)
    candidates, cand_u = _candidates(spec, fits[0].data)
    p, w = _weights(failure, cand_u)
    keep = p >= 0.3
    parts = [(f.weight, f.post.for_scoring(spec["mcmc"]), f.data) for f in fits]
    expected = (combined_scores("qb-mgp", parts, cand_u).numpy() * w)[keep]
    order = np.argsort(-expected, kind="stable")[: len(ranking)]
    assert [r["index"] for r in ranking] == candidates[keep][order].tolist()
    np.testing.assert_allclose([r["score"] for r in ranking], expected[order], rtol=1e-12)


@pytest.mark.parametrize("mode", ["sequential", "parallel"])
def test_none_or_no_failure_ranks_as_before_bit_for_bit(fitted, mode):
    labels, failures, data, post, _ = fitted
    spec = dict(SPEC, mode=mode)
    before = fitting.model_and_ranking(spec, POOL, data, post, set(), [5], 0.0)
    none = dict(spec, failures={"model": "none", "min_success": 0.3})
    for campaign, runs in ((none, failures), (spec, []), ({**spec, "failures": None}, [])):
        failure = fit_campaign(campaign, labels, runs, data.seed)
        assert failure is None  # nothing fitted: no cost
        after = fitting.model_and_ranking(
            campaign, POOL, data, post, set(), [5], 0.0, failure=failure
        )
        assert json.dumps(after[1]) == json.dumps(before[1])
        assert "failures" not in after[0]


def test_failures_only_weigh_nothing_out():
    """Every run failed: a constant probability, no place preferred, no candidate left out (the
    acquisition's order), so the campaign is not stalled by a model that knows nothing."""
    labels, failures = _runs()
    failure = fit_campaign(SPEC, [], failures, 0)
    assert isinstance(failure.model, Constant)
    keep, p = failure.weigh(np.random.default_rng(0).random((50, 2)))
    assert keep.all() and np.allclose(p, 1 / 8)


def test_the_runs_fitted_are_bounded_and_keep_the_failures():
    rng = np.random.default_rng(0)
    u = rng.random((1000, 3))
    success = (u[:, 0] < 0.92).astype(float)
    rows = bounded(u, success, seed=4)
    assert len(rows) == MAX_RUNS and np.array_equal(rows, np.sort(rows))
    failed = np.flatnonzero(success == 0)
    assert len(failed) <= MAX_RUNS // 2 and set(failed) <= set(rows)
    near = rows[success[rows] == 1]
    assert (u[near, 0] > 0.75).mean() > 0.5  # half of the successes by the boundary
    assert np.array_equal(bounded(u, success, seed=4), rows)  # seeded
    assert np.array_equal(bounded(u[:150], success[:150], seed=4), np.arange(150))
    many = np.zeros(1000)
    many[:10] = 1
    rows = bounded(u, many, seed=1)
    assert (many[rows] == 0).sum() == MAX_RUNS // 2 and (many[rows] == 1).sum() == 10


def test_a_stored_failure_model_reads_back_to_the_same_probabilities(fitted):
    *_, failure = fitted
    again = FailureModel.from_dict(json.loads(json.dumps(failure.to_dict())))
    u = np.random.default_rng(2).random((30, 2))
    assert np.array_equal(again.p_success(u), failure.p_success(u))
    assert Space.of(SPEC["inputs"]).to_gp([[0.5, 0.5]]).shape == (1, 2)
