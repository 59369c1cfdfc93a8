"""The GP against GPyTorch's ExactGP with the same hyperparameters; with known label noise, its
predictions against the formula written out in numpy."""

import gpytorch
import numpy as np
import pytest
import torch

from fbgp_al.worker import gp
from fbgp_al.worker.gp import Conditioned

D = torch.float64


class _ExactGP(gpytorch.models.ExactGP):
    def __init__(self, x, y, likelihood):
        super().__init__(x, y, likelihood)
        self.mean_module = gpytorch.means.ZeroMean()
        self.covar_module = gpytorch.kernels.RBFKernel(ard_num_dims=x.shape[1])

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def _gpytorch(u, z, lengthscale, noise):
    """GPyTorch's exact GP with these hyperparameters, set once its parameters are float64 (set
    before, they pass through float32: 1e-7 apart)."""
    likelihood = gpytorch.likelihoods.GaussianLikelihood(
        noise_constraint=gpytorch.constraints.GreaterThan(1e-10)
    ).to(D)
    likelihood.noise = torch.as_tensor(noise, dtype=D)
    model = _ExactGP(u, z, likelihood).to(D)
    model.covar_module.lengthscale = torch.as_tensor(lengthscale, dtype=D)
    model.eval(), likelihood.eval()
    return model, likelihood


def _gpytorch_prediction(u, z, lengthscale, noise, cand):
    """GPyTorch's predictive distribution of y at ``cand``, exact (no fast variances)."""
    model, likelihood = _gpytorch(u, z, lengthscale, noise)
    with (
        torch.no_grad(),
        gpytorch.settings.fast_pred_var(False),
        gpytorch.settings.skip_posterior_variances(False),
    ):
        return likelihood(model(cand))


@pytest.fixture
def data():
    g = torch.Generator().manual_seed(1)
    u = torch.rand(15, 2, generator=g, dtype=D)
    z = torch.sin(6 * u).sum(1) + 0.1 * torch.randn(15, generator=g, dtype=D)
    return u, (z - z.mean()) / z.std()


HYPERS = [(torch.tensor([0.2, 0.5], dtype=D), 0.01), (torch.tensor([1.5, 0.1], dtype=D), 0.3)]


@pytest.mark.parametrize("lengthscale,noise", HYPERS)
def test_log_marginal_likelihood_matches_gpytorch(data, lengthscale, noise):
    u, z = data
    ours = gp.log_marginal_likelihood(u, z, lengthscale[None], torch.tensor([noise], dtype=D))
    model, likelihood = _gpytorch(u, z, lengthscale, noise)
    model.train(), likelihood.train()
    with gpytorch.settings.fast_computations(False, False, False):
        mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
        theirs = mll(model(u), z) * len(z)  # GPyTorch divides by n
    assert ours.shape == (1,)
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-7)  # GPyTorch may add 1e-8 jitter


@pytest.mark.parametrize("lengthscale,noise", HYPERS)
def test_predictions_match_gpytorch(data, lengthscale, noise):
    u, z = data
    cand = torch.rand(40, 2, generator=torch.Generator().manual_seed(2), dtype=D)
    mean, var = gp.predict(u, z, lengthscale[None], torch.tensor([noise], dtype=D), cand)
    pred = _gpytorch_prediction(u, z, lengthscale, noise, cand)
    # GPyTorch's own float64 path: 6e-14 apart here
    torch.testing.assert_close(mean[0], pred.mean, rtol=0, atol=1e-11)
    torch.testing.assert_close(var[0], pred.variance, rtol=0, atol=1e-11)  # of y: noise included


def test_batch_and_chunking_do_not_change_predictions(data, monkeypatch):
    u, z = data
    ls = torch.tensor([[0.2, 0.5], [1.5, 0.1], [0.7, 0.7]], dtype=D)
    noise = torch.tensor([0.01, 0.3, 0.05], dtype=D)
    cand = torch.rand(101, 2, generator=torch.Generator().manual_seed(3), dtype=D)
    mean, var = gp.predict(u, z, ls, noise, cand)
    monkeypatch.setattr(gp, "CHUNK_ELEMENTS", 3 * 15 * 7)  # chunks of 4 (a power of two <= 7)
    assert gp.Conditioned.fit(u, z, ls, noise).chunk_size() == 4
    mean_c, var_c = gp.predict(u, z, ls, noise, cand)
    assert torch.allclose(mean, mean_c, atol=1e-12) and torch.allclose(var, var_c, atol=1e-12)
    for b in range(3):
        mean_b, var_b = gp.predict(u, z, ls[b : b + 1], noise[b : b + 1], cand)
        assert torch.allclose(mean[b], mean_b[0], atol=1e-12)
        assert torch.allclose(var[b], var_b[0], atol=1e-12)


def test_chunks_are_powers_of_two_up_to_the_alignment():
    assert [gp.aligned(k) for k in (0, 1, 2, 3, 7, 8, 1023, 1024, 10**6)] == [
        1,
        1,
        2,
        2,
        4,
        8,
        512,
        1024,
        gp.SCORE_ALIGN,
    ]


def test_joint_covariance_diagonal_is_the_predictive_variance(data):
    u, z = data
    ls, noise = HYPERS[0][0][None], torch.tensor([HYPERS[0][1]], dtype=D)
    cand = torch.rand(9, 2, generator=torch.Generator().manual_seed(4), dtype=D)
    mean, var = gp.predict(u, z, ls, noise, cand)
    mean_j, cov = gp.predictive_covariance(u, z, ls, noise, cand)
    assert torch.allclose(mean, mean_j) and torch.allclose(cov.diagonal(dim1=-2, dim2=-1), var)
    assert torch.allclose(cov, cov.transpose(-1, -2))


def test_singular_covariance_gets_jitter_not_nan():
    # duplicated inputs, long lengthscale and (almost) no noise: K is singular
    u = torch.tensor([[0.3], [0.3], [0.3], [0.7]], dtype=D)
    z = torch.tensor([0.1, 0.1, 0.1, -0.3], dtype=D)
    ls = torch.tensor([[50.0], [0.2]], dtype=D)
    noise = torch.tensor([1e-300, 0.1], dtype=D)
    factor = gp.factorize(u, ls, noise)
    assert factor.ok.all() and factor.jitter[0] > 0 and factor.jitter[1] == 0
    lml = gp.log_marginal_likelihood(u, z, ls, noise)
    mean, var = gp.predict(u, z, ls, noise, torch.linspace(0, 1, 11, dtype=D)[:, None])
    assert torch.isfinite(lml).all() and torch.isfinite(mean).all() and (var >= 0).all()


def test_non_finite_hyperparameters_give_minus_infinity_not_nan():
    u = torch.rand(5, 1, dtype=D)
    z = torch.randn(5, dtype=D)
    lml = gp.log_marginal_likelihood(
        u, z, torch.tensor([[float("nan")], [0.3]], dtype=D), torch.tensor([0.1, 0.1], dtype=D)
    )
    assert lml[0] == -torch.inf and torch.isfinite(lml[1])


def test_rbf_is_the_contract_kernel():
    u1 = torch.rand(6, 3, dtype=D)
    u2 = torch.rand(4, 3, dtype=D)
    ls = torch.tensor([[0.3, 1.0, 2.0]], dtype=D)
    direct = torch.exp(-0.5 * (((u1[:, None] - u2[None]) / ls[0]) ** 2).sum(-1))
    assert torch.allclose(gp.rbf(u1, u2, ls)[0], direct, atol=1e-14)
    assert torch.allclose(gp.rbf(u1, u1, ls)[0].diagonal(), torch.ones(6, dtype=D))


def _kernel(a, b, lengthscale):
    """The ARD RBF kernel written out in numpy."""
    diff = (a[:, None, :] - b[None, :, :]) / lengthscale
    return np.exp(-0.5 * (diff**2).sum(-1))


def _data(n, d, seed):
    rng = np.random.default_rng(seed)
    u, z = rng.random((n, d)), rng.standard_normal(n)
    noise = rng.uniform(0.0, 0.5, n)
    noise[0] = 0.0  # an exact label among them
    return u, z, noise


def test_predictions_with_known_noise_match_the_formula():
    u, z, noise = _data(10, 2, 3)
    cand = np.random.default_rng(4).random((7, 2))
    ls = np.array([[0.3, 0.8], [0.5, 0.2]])
    s2 = np.array([0.01, 0.2])
    gp = Conditioned.fit(
        torch.tensor(u), torch.tensor(z), torch.tensor(ls), torch.tensor(s2), torch.tensor(noise)
    )
    mean, var = gp.predict(torch.tensor(cand))
    for b in range(2):
        K = _kernel(u, u, ls[b]) + np.diag(noise) + s2[b] * np.eye(10)
        k = _kernel(u, cand, ls[b])
        ref_mean = k.T @ np.linalg.solve(K, z)
        ref_var = 1.0 - np.einsum("ij,ij->j", k, np.linalg.solve(K, k)) + s2[b]
        assert np.allclose(mean[b].numpy(), ref_mean, atol=1e-10)
        assert np.allclose(var[b].numpy(), ref_var, atol=1e-10)


def test_repeated_draws_are_factored_once_and_predict_as_each_alone(data, monkeypatch):
    """A batch whose draws repeat (a Laplace mixture's, resampled) factors each distinct draw
    once (:func:`worker.gp.distinct`); every draw's factor and predictions are those of the
    draw fitted alone."""
    u, z = data
    lengthscale = torch.tensor(
        [[0.2, 0.5], [0.2, 0.5], [1.5, 0.1], [0.2, 0.5], [0.7, 0.7]], dtype=D
    )
    noise = torch.tensor([0.01, 0.01, 0.3, 0.01, 0.05], dtype=D)
    assert gp.distinct(lengthscale[2:], noise[2:]) is None  # no two alike
    factored = []
    real = gp.factorize
    monkeypatch.setattr(
        gp, "factorize", lambda u, ls, *a: factored.append(len(ls)) or real(u, ls, *a)
    )
    batch = Conditioned.fit(u, z, lengthscale, noise)
    assert factored == [3]  # three distinct draws of five
    cand = torch.rand(40, 2, generator=torch.Generator().manual_seed(5), dtype=D)
    mean, var = batch.predict(cand)
    for b in range(len(noise)):
        alone = Conditioned.fit(u, z, lengthscale[b : b + 1], noise[b : b + 1])
        torch.testing.assert_close(batch.chol_inv[b], alone.chol_inv[0], rtol=1e-12, atol=1e-12)
        m, v = alone.predict(cand)
        torch.testing.assert_close(mean[b], m[0], rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(var[b], v[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("lengthscale,noise", HYPERS)
def test_the_triangular_product_predicts_as_the_dense_one_and_gpytorch(
    data, monkeypatch, lengthscale, noise
):
    """From TRIANGULAR_FROM labels (here every size) the variances take L^-1 k by dtrmm: the
    dense product's numbers to 1e-12, in chunks with reused buffers too, and GPyTorch's."""
    u, z = data
    ls = torch.stack([lengthscale, lengthscale.flip(0)])
    s2 = torch.tensor([noise, 2 * noise], dtype=D)
    cand = torch.rand(101, 2, generator=torch.Generator().manual_seed(4), dtype=D)
    dense = gp.predict(u, z, ls, s2, cand)
    monkeypatch.setattr(gp, "TRIANGULAR_FROM", 0)
    monkeypatch.setattr(gp, "CHUNK_ELEMENTS", 2 * 15 * 16)  # chunks of 16 in reused buffers
    triangular = gp.predict(u, z, ls, s2, cand)
    for a, b in zip(triangular, dense, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    fitted = gp.Conditioned.fit(u, z, ls, s2)
    k = gp.rbf(u, cand, ls)
    torch.testing.assert_close(
        gp.triangular_product(fitted.chol_inv, k.clone()), fitted.chol_inv @ k, rtol=0, atol=1e-12
    )
    pred = _gpytorch_prediction(u, z, lengthscale, noise, cand)
    torch.testing.assert_close(triangular[1][0], pred.variance, rtol=0, atol=1e-11)
