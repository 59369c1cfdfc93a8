"""A fitted failure model (:mod:`worker.feasibility.classifier`): stored as JSON and read back to
the same predictions, bit for bit; its latent posterior at its own runs against the dense
formulas (EP: ``(K^-1 + S)^-1``; Laplace: the mode and ``(K^-1 + W)^-1``); predictions in chunks
as in one; and the constant of a campaign whose every run failed."""

import json

import numpy as np
import pytest
from scipy import special

from fbgp_al.worker.feasibility import classifier
from fbgp_al.worker.feasibility.classifier import Classifier, Constant, condition, fit, from_dict
from fbgp_al.worker.feasibility.likelihoods import kernel, likelihood_terms


def _runs(n: int = 14, seed: int = 0):
    u = np.random.default_rng(seed).random((n, 2))
    return u, (u[:, 0] + u[:, 1] < 1.1).astype(float)


ARGS = (np.array([0.4, 0.6]), 2.0, 0.5)


@pytest.mark.parametrize(
    ("likelihood", "inference"), [("probit", "ep"), ("probit", "laplace"), ("logistic", "laplace")]
)
def test_a_stored_model_predicts_the_same_bits(likelihood, inference):
    u, success = _runs()
    model = condition(u, success, *ARGS, likelihood=likelihood, inference=inference)
    body = json.loads(json.dumps(model.to_dict()))
    again = from_dict(body)
    assert isinstance(again, Classifier) and again.inference == inference
    grid = np.random.default_rng(1).random((50, 2))
    np.testing.assert_array_equal(again.p_success(grid), model.p_success(grid))
    assert again.log_marginal == model.log_marginal


def test_a_constant_is_stored_and_predicts_its_rate_everywhere():
    model = fit(np.random.default_rng(0).random((5, 2)), np.zeros(5))
    assert isinstance(model, Constant) and model.p == pytest.approx(1 / 7)
    again = from_dict(json.loads(json.dumps(model.to_dict())))
    assert again == model
    mean, var = again.latent(np.zeros((3, 2)))
    np.testing.assert_allclose(special.ndtr(mean), 1 / 7)
    assert (var == 0).all()
    np.testing.assert_array_equal(again.p_success(np.zeros((4, 2))), np.full(4, 1 / 7))


def test_ep_s_latent_at_its_runs_is_the_dense_posterior():
    u, success = _runs()
    model = condition(u, success, *ARGS, inference="ep")
    K = kernel(u, u, *ARGS)
    Sigma = np.linalg.inv(np.linalg.inv(K) + np.diag(model.tau))
    mean, var = model.latent(u)
    np.testing.assert_allclose(mean, Sigma @ model.nu, rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(var, np.diag(Sigma), rtol=1e-7, atol=1e-8)


def test_laplace_s_latent_at_its_runs_is_the_mode_and_the_inverse_hessian():
    u, success = _runs()
    model = condition(u, success, *ARGS, inference="laplace")
    K = kernel(u, u, *ARGS)
    _, _, W, _ = likelihood_terms(model.f_hat, 2 * success - 1, "probit")
    mean, var = model.latent(u)
    np.testing.assert_allclose(mean, model.f_hat, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(
        var, np.diag(np.linalg.inv(np.linalg.inv(K) + np.diag(W))), rtol=1e-7, atol=1e-8
    )


def test_predictions_in_chunks_are_those_in_one(monkeypatch):
    u, success = _runs()
    model = condition(u, success, *ARGS)
    grid = np.random.default_rng(2).random((101, 2))
    whole = model.latent(grid)
    monkeypatch.setattr(classifier, "CHUNK_ELEMENTS", 7 * len(u))  # 7 candidates at a time
    assert model.chunk_size() == 7
    for chunked, one in zip(model.latent(grid), whole, strict=True):
        np.testing.assert_allclose(chunked, one, rtol=1e-13, atol=1e-15)


def test_runs_that_never_failed_need_no_model_and_bad_runs_are_refused():
    assert fit(np.random.default_rng(0).random((4, 2)), np.ones(4)) is None
    with pytest.raises(ValueError, match="4 inputs but 3 outcomes"):
        fit(np.zeros((4, 2)), np.array([1, 0, 1]))
    with pytest.raises(ValueError, match="finite"):
        fit(np.array([[0.1], [np.nan]]), np.array([1, 0]))
