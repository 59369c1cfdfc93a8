"""An exported model's failure model in numpy alone (:mod:`clients.failure_model`): the SDK's
probability of success is the service's (:mod:`worker.feasibility`) to rounding, for a fitted
classifier and for a constant; Phi in both tails; what it cannot read is refused."""

import json

import numpy as np
import pytest
from scipy import special

from fbgp_al.clients.failure_model import CHUNK_ELEMENTS, FailureModel, normal_cdf
from fbgp_al.worker.feasibility import condition, fit


def _runs(seed: int = 0):
    u = np.random.default_rng(seed).random((25, 3))
    return u, (u[:, 0] + 0.5 * u[:, 1] < 0.9).astype(float)


def test_the_sdk_predicts_the_service_s_probability_of_success(monkeypatch):
    u, success = _runs()
    model = fit(u, success, seed=1)
    body = {"model": json.loads(json.dumps(model.to_dict()))}
    sdk = FailureModel(body, features=3)
    grid = np.random.default_rng(2).random((300, 3))
    np.testing.assert_allclose(sdk.p_success(grid), model.p_success(grid), rtol=1e-9, atol=1e-12)
    import fbgp_al.clients.failure_model as module

    monkeypatch.setattr(module, "CHUNK_ELEMENTS", 25 * 7)  # 7 points at a time
    np.testing.assert_allclose(sdk.p_success(grid), model.p_success(grid), rtol=1e-9, atol=1e-12)
    assert CHUNK_ELEMENTS == 1 << 22


def test_a_constant_is_one_probability_everywhere():
    model = fit(np.random.default_rng(0).random((4, 2)), np.zeros(4))
    sdk = FailureModel({"model": model.to_dict()}, features=2)
    np.testing.assert_array_equal(sdk.p_success(np.zeros((5, 2))), np.full(5, 1 / 6))


def test_phi_is_accurate_in_both_tails():
    x = np.array([-37.0, -20.0, -5.0, 0.0, 1.5, 8.0])
    np.testing.assert_allclose(normal_cdf(x), special.ndtr(x), rtol=1e-12)
    assert normal_cdf(np.array([-38.0]))[0] > 0


def test_what_the_sdk_cannot_read_is_refused():
    u, success = _runs()
    laplace = condition(u, success, 0.5, 1.0, 0.5, inference="laplace").to_dict()
    with pytest.raises(ValueError, match="upgrade fbgp-al"):
        FailureModel({"model": laplace}, features=3)
    ep = condition(u, success, 0.5, 1.0, 0.5, inference="ep").to_dict()
    with pytest.raises(ValueError, match="not over the model's 4 features"):
        FailureModel({"model": ep}, features=4)
