"""The GP an exported model predicts with (:mod:`clients.numpy_gp`): the kernel against
scikit-learn's RBF, the Cholesky factors and their fallbacks, and each hyperparameter set's
predictions against scikit-learn's GaussianProcessRegressor with the same fixed kernel."""

import numpy as np
import pytest
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, WhiteKernel

from fbgp_al.clients import numpy_gp


def test_the_kernel_is_scikit_learns_rbf_for_each_set():
    rng = np.random.default_rng(0)
    u1, u2 = rng.random((6, 3)), rng.random((4, 3))
    ls = np.array([[0.2, 0.5, 1.0], [2.0, 0.1, 0.7]])
    K = numpy_gp.rbf(u1, u2, ls)
    assert K.shape == (2, 6, 4)
    for b in range(2):
        np.testing.assert_allclose(K[b], RBF(ls[b])(u1, u2), rtol=1e-12, atol=1e-15)
    same = numpy_gp.rbf(u1, u1, ls)
    assert (same <= 1.0).all()  # clamped at zero distance, never above 1 by rounding
    np.testing.assert_allclose(np.diagonal(same, axis1=1, axis2=2), 1.0, rtol=1e-15)


def test_a_factor_that_fails_gets_jitter_and_one_no_jitter_helps_the_identity():
    good = np.array([[2.0, 0.5], [0.5, 1.0]])
    singular = np.ones((2, 2))  # positive semi-definite: the first jitter makes it definite
    broken = np.array([[np.nan, 0.0], [0.0, 1.0]])
    chol = numpy_gp.cholesky(np.stack([good, singular, broken]))
    np.testing.assert_allclose(chol[0], np.linalg.cholesky(good))
    np.testing.assert_allclose(chol[1] @ chol[1].T, singular + 1e-9 * np.eye(2), rtol=0, atol=1e-13)
    np.testing.assert_array_equal(chol[2], np.eye(2))
    assert numpy_gp.factor_or_none(broken) is None
    assert numpy_gp.factor_or_none(-good) is None


@pytest.mark.parametrize("known_noise", [False, True])
def test_each_set_predicts_as_scikit_learns_gp_with_its_kernel(known_noise):
    rng = np.random.default_rng(1)
    u, cand = rng.random((15, 2)), rng.random((40, 2))
    z = np.sin(6 * u[:, 0]) + u[:, 1]
    ls = np.array([[0.3, 0.8], [1.5, 0.2]])
    s2 = np.array([1e-3, 0.05])
    noise = rng.uniform(0.01, 0.1, 15) if known_noise else None
    fitted = numpy_gp.Fitted(u, z, noise, ls, s2)
    mean, var = fitted.predict(cand)
    assert mean.shape == var.shape == (2, 40)
    for b in range(2):
        alpha = s2[b] + (noise if known_noise else 0.0)  # the labels' noise on the diagonal
        gp = GaussianProcessRegressor(RBF(ls[b], "fixed"), alpha=alpha, optimizer=None)
        gp.fit(u, z)
        m, sd = gp.predict(cand, return_std=True)
        np.testing.assert_allclose(mean[b], m, rtol=1e-8, atol=1e-9)
        # z's variance: the latent's and the nugget
        np.testing.assert_allclose(var[b], sd**2 + s2[b], rtol=1e-7, atol=1e-9)
    if not known_noise:  # the same as the nugget in a WhiteKernel
        gp = GaussianProcessRegressor(
            RBF(ls[0], "fixed") + WhiteKernel(s2[0], "fixed"), alpha=1e-15, optimizer=None
        ).fit(u, z)
        np.testing.assert_allclose(mean[0], gp.predict(cand), rtol=1e-7, atol=1e-8)


def test_predictions_in_chunks_and_groups_are_those_in_one(monkeypatch):
    rng = np.random.default_rng(2)
    u, cand = rng.random((9, 2)), rng.random((23, 2))
    z, ls, s2 = rng.standard_normal(9), rng.uniform(0.2, 1.0, (3, 2)), np.full(3, 1e-2)
    whole = numpy_gp.Fitted(u, z, None, ls, s2).predict(cand)
    monkeypatch.setattr(numpy_gp, "CHUNK_ELEMENTS", 3 * 9 * 4)  # 4 candidates at a time
    monkeypatch.setattr(numpy_gp, "FIT_ELEMENTS", 81)  # one set at a time
    parts = numpy_gp.Fitted(u, z, None, ls, s2).predict(cand)
    for part, one in zip(parts, whole, strict=True):
        np.testing.assert_allclose(part, one, rtol=1e-12, atol=1e-14)
    empty = numpy_gp.Fitted(u, z, None, ls, s2).predict(np.empty((0, 2)))
    assert empty[0].shape == empty[1].shape == (3, 0)
