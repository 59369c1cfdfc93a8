"""A campaign's failure model (:mod:`worker.feasibility.campaign`): its runs as the classifier
sees them, the subset it is fitted on beyond ``MAX_RUNS`` runs, what the ranking keeps, and the
model's body stored and read back."""

import json

import numpy as np
import pytest
from scipy import special
from scipy.spatial.distance import cdist

from fbgp_al.worker.feasibility import Constant, condition
from fbgp_al.worker.feasibility.campaign import (
    FailureModel,
    bounded,
    bracketed,
    fit_campaign,
    of_model,
    outcomes,
)
from fbgp_al.worker.vocabulary.space import Space

INPUTS = [{"name": "a", "lower": 0.0, "upper": 10.0}, {"name": "b", "lower": -1.0, "upper": 1.0}]


def test_the_runs_are_the_labels_then_the_failures_in_the_gp_s_features():
    space = Space.of(INPUTS)
    labels = [{"x": [2.0, 0.0]}, {"x": [5.0, 0.5]}]
    failures = [{"x": [10.0, -1.0]}]
    u, success = outcomes(space, labels, failures)
    np.testing.assert_allclose(u, space.to_gp([[2.0, 0.0], [5.0, 0.5], [10.0, -1.0]]))
    np.testing.assert_array_equal(success, [1.0, 1.0, 0.0])


def test_all_runs_are_fitted_up_to_the_limit():
    success = np.r_[np.ones(8), np.zeros(4)]
    np.testing.assert_array_equal(bounded(np.zeros((12, 2)), success, 0, limit=12), np.arange(12))


@pytest.mark.parametrize("n_failed", [10, 40])
def test_beyond_the_limit_the_failures_and_the_successes_nearest_them_are_kept(n_failed):
    rng = np.random.default_rng(0)
    u = rng.random((200, 2))
    success = np.ones(200)
    success[rng.choice(200, n_failed, replace=False)] = 0.0
    limit = 40
    rows = bounded(u, success, seed=5, limit=limit)
    np.testing.assert_array_equal(rows, bounded(u, success, seed=5, limit=limit))
    assert len(rows) == limit and (np.diff(rows) > 0).all()
    failed = np.flatnonzero(success == 0)
    kept_failed = np.intersect1d(rows, failed)
    assert len(kept_failed) == min(n_failed, limit // 2)
    ok = np.flatnonzero(success == 1)
    near = (limit - len(kept_failed)) // 2
    distance = cdist(u[ok], u[kept_failed]).min(1)
    nearest = ok[np.argsort(distance, kind="stable")[:near]]
    assert set(nearest) <= set(rows)


def test_the_ranking_keeps_the_candidates_likely_to_succeed_and_a_constant_keeps_all():
    u = np.random.default_rng(0).random((20, 1))
    success = (u[:, 0] < 0.5).astype(float)
    model = FailureModel(condition(u, success, 0.2, 4.0, 0.5), 0.3, 10, 10, 20, 0.1)
    grid = np.linspace(0, 1, 11)[:, None]
    keep, weight = model.weigh(grid)
    p = model.p_success(grid)
    np.testing.assert_array_equal(keep, p >= 0.3)
    assert keep[0] and not keep[-1]
    assert ((weight >= 0) & (weight <= p)).all()  # a pessimistic chance: at most the mean's
    # the campaign's weight_quantile: the median (0.5) is Phi(mean); a lower quantile weighs less
    mean, _ = model.model.latent(grid)
    weights = []
    for q in (0.1, 0.3, 0.5):
        model.weight_quantile = q
        weights.append(model.weigh(grid)[1])
    np.testing.assert_allclose(weights[2], special.ndtr(mean), rtol=1e-12)
    assert (weights[0] <= weights[1]).all() and (weights[1] <= weights[2]).all()
    assert (weights[0] < weights[1]).any()
    flat = FailureModel(Constant(0.1, 0, 8), 0.3, 0, 8, 8, 0.0)
    keep, p = flat.weigh(grid)
    assert keep.all() and (p == 0.1).all()


def _between_by_pairs(runs, success, u, bracket):
    """The bracket's definition, pair by pair: a candidate nearer to both runs of a failure and
    a success at most ``bracket`` apart than they are to each other."""
    inside = np.zeros(len(u), dtype=bool)
    for f in runs[success == 0]:
        for s in runs[success == 1]:
            width = np.linalg.norm(f - s)
            if width <= bracket:
                near_f = np.linalg.norm(u - f, axis=1) < width
                inside |= near_f & (np.linalg.norm(u - s, axis=1) < width)
    return inside


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("bracket", [0.0, 0.05, 0.2, 0.5])
def test_the_candidates_between_a_failure_and_a_success_are_those_of_every_pair(d, bracket):
    rng = np.random.default_rng(d)
    runs = rng.random((30, d))
    success = (rng.random(30) < 0.6).astype(float)
    u = rng.random((1500, d))
    expected = _between_by_pairs(runs, success, u, bracket)
    np.testing.assert_array_equal(bracketed(runs, success, u, bracket), expected)
    assert expected.any() if bracket >= 0.2 else (bracket > 0 or not expected.any())
    # no failure, or no success: nothing is bracketed
    assert not bracketed(runs, np.ones(30), u, 0.5).any()
    assert not bracketed(runs, np.zeros(30), u, 0.5).any()


def test_a_candidate_between_a_failure_and_a_success_close_by_is_weighed_by_its_median():
    """Runs succeed on [0, 0.4] and at 0.52, fail at 0.5 and beyond 0.8: the border lies in
    (0.5, 0.52), and 0.51, between the two, is weighed by ``Phi(m)``; 0.49, beside the failure
    but not between it and a success 0.05 or less away, by the 10% quantile, as is every other
    point; with ``bracket`` 0 so is 0.51."""
    u = np.r_[np.linspace(0.0, 0.4, 9), 0.52, 0.6, 0.7, 0.5, 0.85, 0.95][:, None]
    success = np.r_[np.ones(12), np.zeros(3)]
    model = FailureModel(condition(u, success, 0.2, 4.0, 0.5), 0.0, 12, 3, 15, 0.0, bracket=0.05)
    grid = np.array([[0.3], [0.49], [0.51], [0.65]])
    mean, var = model.model.latent(grid)
    quantile = special.ndtr(mean + special.ndtri(0.1) * np.sqrt(var))
    _, weight = model.weigh(grid)
    np.testing.assert_array_equal(model.between(grid), [False, False, True, False])
    np.testing.assert_allclose(weight, np.r_[quantile[:2], special.ndtr(mean[2]), quantile[3]])
    assert weight[2] > quantile[2] + 0.2
    model.bracket = 0.0
    np.testing.assert_allclose(model.weigh(grid)[1], quantile)
    assert not FailureModel(Constant(0.1, 0, 8), 0.3, 0, 8, 8, 0.0).between(grid).any()


def test_the_model_s_body_reads_back_to_the_same_model():
    u = np.random.default_rng(0).random((12, 2))
    model = FailureModel(
        condition(u, u[:, 0] < 0.6, [0.3, 0.5], 2.0, 0.5),
        0.05,
        7,
        5,
        12,
        0.2,
        excluded=3,
        weight_quantile=0.25,
        bracket=0.2,
        bracketed=4,
    )
    body = json.loads(json.dumps({"failures": model.to_dict()}))
    again = of_model(body)
    assert (
        again.min_success,
        again.n_successes,
        again.n_failures,
        again.n_fitted,
        again.excluded,
        again.weight_quantile,
        again.bracket,
        again.bracketed,
    ) == (0.05, 7, 5, 12, 3, 0.25, 0.2, 4)
    np.testing.assert_array_equal(again.p_success(u), model.p_success(u))
    np.testing.assert_array_equal(again.weigh(u)[1], model.weigh(u)[1])
    assert of_model(None) is None and of_model({"version": 3}) is None
    # a model stored before the bracket weighed every candidate by the quantile: it still does
    del body["failures"]["bracket"], body["failures"]["bracketed"]
    assert (of_model(body).bracket, of_model(body).bracketed) == (0.0, 0)


def test_no_model_without_a_failed_run_or_when_the_campaign_wants_none():
    spec = {"inputs": INPUTS}
    labels = [{"x": [1.0, 0.0]}]
    assert fit_campaign(spec, labels, [], seed=0) is None
    none = {**spec, "failures": {"model": "none"}}
    assert fit_campaign(none, labels, [{"x": [9.0, 0.9]}], seed=0) is None
    fitted = fit_campaign(spec, labels, [{"x": [9.0, 0.9]}], seed=0)
    assert (fitted.n_successes, fitted.n_failures, fitted.n_fitted) == (1, 1, 2)
