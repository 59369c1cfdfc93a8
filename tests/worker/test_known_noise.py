"""Known noise: labels that carry their own noise variances. The GP's covariance of the labels is
``Kf + diag(noise_z) + s2 I`` (``noise_z = noise / y_std^2``, ``s2`` the learned nugget); checked
against autograd, scipy and the formulas written out in numpy, and on Motorcycle against one
learned noise level."""

import dataclasses
import math

import numpy as np
import pytest
import torch
from scipy.stats import multivariate_normal, norm

from clients.simulators import get_simulator
from worker import answers, fitting, views
from worker.acquisition import greedy_batch
from worker.gp import Conditioned, log_marginal_likelihood
from worker.mcmc import Posterior
from worker.potential import GPPotential
from worker.spec.design import GridPool

D = torch.float64


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


@pytest.mark.parametrize("n,d", [(1, 1), (9, 1), (15, 3)])
def test_the_potential_with_known_noise_matches_autograd_and_scipy(n, d):
    u, z, noise = _data(n, d, n + d)
    theta = np.random.default_rng(d).normal(-0.5, 0.7, (5, d + 1))
    value, grad = GPPotential(u, z, noise)(theta)
    # autograd through the torch GP's likelihood and the LogNormal(0, sqrt 3) priors
    t = torch.tensor(theta, requires_grad=True)
    zero, scale = torch.tensor(0.0, dtype=D), torch.tensor(math.sqrt(3.0), dtype=D)
    prior = torch.distributions.Normal(zero, scale).log_prob(t).sum(-1)
    lml = log_marginal_likelihood(torch.tensor(u), torch.tensor(z), t[:, :d].exp(),
                                  t[:, d].exp(), torch.tensor(noise))  # fmt: skip
    (-(lml + prior)).sum().backward()
    assert np.allclose(value, (-(lml + prior)).detach().numpy(), rtol=1e-10, atol=1e-9)
    assert np.allclose(grad, t.grad.numpy(), rtol=1e-7, atol=1e-7)
    # and the likelihood itself against scipy with the covariance written out
    for row in range(len(theta)):
        ls, s2 = np.exp(theta[row, :d]), np.exp(theta[row, d])
        cov = _kernel(u, u, ls) + np.diag(noise) + s2 * np.eye(n)
        ref = multivariate_normal(np.zeros(n), cov).logpdf(z)
        assert lml[row].item() == pytest.approx(ref, rel=1e-10, abs=1e-9)


def test_the_noise_changes_the_potential_and_zero_noise_changes_nothing():
    u, z, noise = _data(12, 2, 0)
    theta = np.array([[-1.0, -0.5, -2.0], [0.3, -1.2, -4.0]])
    plain = GPPotential(u, z)(theta)
    zeros = GPPotential(u, z, np.zeros(12))(theta)
    known = GPPotential(u, z, noise)(theta)
    assert np.allclose(plain[0], zeros[0], rtol=1e-13) and np.allclose(plain[1], zeros[1])
    assert np.all(np.abs(plain[0] - known[0]) > 0.1)
    with pytest.raises(ValueError, match="one variance per label"):
        GPPotential(u, z, noise[:5])


def test_predictions_with_known_noise_match_the_formula():
    u, z, noise = _data(10, 2, 3)
    cand = np.random.default_rng(4).random((7, 2))
    ls = np.array([[0.3, 0.8], [0.5, 0.2]])
    s2 = np.array([0.01, 0.2])
    gp = Conditioned.fit(torch.tensor(u), torch.tensor(z), torch.tensor(ls), torch.tensor(s2),
                         torch.tensor(noise))  # fmt: skip
    mean, var = gp.predict(torch.tensor(cand))
    for b in range(2):
        K = _kernel(u, u, ls[b]) + np.diag(noise) + s2[b] * np.eye(10)
        k = _kernel(u, cand, ls[b])
        ref_mean = k.T @ np.linalg.solve(K, z)
        ref_var = 1.0 - np.einsum("ij,ij->j", k, np.linalg.solve(K, k)) + s2[b]
        assert np.allclose(mean[b].numpy(), ref_mean, atol=1e-10)
        assert np.allclose(var[b].numpy(), ref_var, atol=1e-10)


def _labels(x, y, noise=None):
    return [
        {"x": [float(a)], "y": float(b), "index": None, "ticket": None,
         **({} if noise is None else {"noise": float(noise[i])})}
        for i, (a, b) in enumerate(zip(x, y, strict=True))
    ]  # fmt: skip


SPEC = {
    "inputs": [{"name": "x", "lower": 0.0, "upper": 10.0}],
    "pool": {"type": "grid", "points_per_dim": 51},
    "pool_subsample": 51,
    "acquisition": "alm",
    "mcmc": {"chains": 2, "warmup": 30, "samples": 30, "thinning": 3},
    "seed": 2,
    "noise": {"type": "known", "nugget": True},
}


def test_prepare_puts_the_noise_in_the_gps_units():
    x, y, noise = [1.0, 4.0, 6.0, 9.0], [3.0, -1.0, 2.0, 0.5], [0.5, 0.0, 2.0, 0.1]
    data = fitting.prepare(SPEC, _labels(x, y, noise))
    assert np.allclose(data.noise.numpy(), np.array(noise) / np.std(y, ddof=1) ** 2)
    assert fitting.prepare({**SPEC, "noise": {"type": "learned"}}, _labels(x, y)).noise is None
    unset = {k: v for k, v in SPEC.items() if k != "noise"}
    assert fitting.prepare(unset, _labels(x, y)).noise is None
    # a variance too large for float64 in the GP's units is capped, finite
    tiny = fitting.prepare(SPEC, _labels(x, [1e-200, 2e-200, 3e-200, 0.0], [1e150] * 4))
    assert torch.isfinite(tiny.noise).all()


def test_metrics_and_predictions_with_known_noise_match_the_formula():
    """``answers`` on a hand-made model: /predict's variance is latent + s2 (original units), and
    /evaluate's NLML and mixture NLPD add the test points' own noise to it."""
    rng = np.random.default_rng(7)
    x, y, noise = rng.uniform(0, 10, 8), rng.normal(2.0, 3.0, 8), rng.uniform(0.1, 4.0, 8)
    xt, yt, nt = rng.uniform(0, 10, 5), rng.normal(2.0, 3.0, 5), rng.uniform(0.0, 4.0, 5)
    labels = _labels(x, y, noise)
    mean_y, std_y = float(np.mean(y)), float(np.std(y, ddof=1))
    draws = {"lengthscale": [[0.2], [0.35]], "noise": [0.05, 0.2]}
    model = {"n_labeled": 8, "version": 8, "samples": draws, "acquisition_samples": draws,
             "mode": {"lengthscale": [0.3], "noise": 0.1}, "chains": 2,
             "transform": {"lower": [0.0], "upper": [10.0], "y_mean": mean_y,
                           "y_std": std_y}}  # fmt: skip
    u, ut = x[:, None] / 10, xt[:, None] / 10
    z, zt = (y - mean_y) / std_y, (yt - mean_y) / std_y
    nz, ntz = noise / std_y**2, nt / std_y**2

    def gp(ls, s2):
        K = _kernel(u, u, np.array([ls])) + np.diag(nz) + s2 * np.eye(8)
        k = _kernel(u, ut, np.array([ls]))
        mean = k.T @ np.linalg.solve(K, z)
        cov = _kernel(ut, ut, np.array([ls])) - k.T @ np.linalg.solve(K, k) + s2 * np.eye(5)
        return mean, cov

    mean, cov = gp(0.3, 0.1)
    pred = answers.predict(SPEC, model, labels, xt[:, None].tolist())
    assert np.allclose(pred["mean"], mean_y + std_y * mean, atol=1e-9)
    assert np.allclose(pred["variance"], std_y**2 * np.diag(cov), rtol=1e-9)
    got = answers.metrics(SPEC, model, labels, xt[:, None].tolist(), yt.tolist(), nt.tolist())
    nlml = -multivariate_normal(mean, cov + np.diag(ntz)).logpdf(zt) / 5
    assert got["nlml"] == pytest.approx(nlml, rel=1e-9)
    dens = []
    for ls, s2 in ((0.2, 0.05), (0.35, 0.2)):
        m, c = gp(ls, s2)
        dens.append(norm(m, np.sqrt(np.diag(c) + ntz)).pdf(zt))
    assert got["nlpd_mixture"] == pytest.approx(-np.log(np.mean(dens, 0)).mean(), rel=1e-9)
    assert got["rmse"] == pytest.approx(np.sqrt(np.mean((mean_y + std_y * mean - yt) ** 2)))
    # without the test points' noise: the variances are latent + s2 alone
    bare = answers.metrics(SPEC, model, labels, xt[:, None].tolist(), yt.tolist())
    assert bare["nlml"] == pytest.approx(-multivariate_normal(mean, cov).logpdf(zt) / 5, rel=1e-9)


def test_fantasies_in_a_greedy_batch_have_the_nugget_alone():
    """A pending point (its noise unknown) enters a draw's GP with ``s2`` only: ALM's score of
    the first pick is the variance given the labels (with their noise) and that fantasy."""
    u, z, noise = _data(6, 1, 11)
    cand = torch.linspace(0, 1, 21, dtype=D)[:, None]
    pending = torch.tensor([[0.5]], dtype=D)
    ls = torch.tensor([[0.2]], dtype=D)
    post = Posterior(lengthscale=ls, noise=torch.tensor([0.3], dtype=D), chains=1,
                     mode_lengthscale=ls[0], mode_noise=0.3)  # fmt: skip
    order, scores = greedy_batch("alm", post, torch.tensor(u), torch.tensor(z), cand, 1, pending,
                                 label_noise=torch.tensor(noise))  # fmt: skip
    uu = np.concatenate([u, [[0.5]]])
    K = _kernel(uu, uu, np.array([0.2])) + np.diag(np.append(noise, 0.0)) + 0.3 * np.eye(7)
    k = _kernel(uu, cand.numpy(), np.array([0.2]))
    var = 1.0 - np.einsum("ij,ij->j", k, np.linalg.solve(K, k)) + 0.3
    assert int(order[0]) == int(np.argmax(var))
    assert float(scores[0]) == pytest.approx(var.max(), rel=1e-10)


def test_known_noise_beats_one_learned_level_on_motorcycle():
    """Motorcycle's noise sd runs from 0.03 to 0.9: a GP told each label's noise variance
    (noise_std(x)^2) predicts held-out points, whose own noise is known, with a lower NLPD than
    one that learns a single level, through the service's refit (sampler, mode) and answers."""
    sim = get_simulator("motorcycle")
    rng = np.random.default_rng(0)
    pool = np.arange(101.0)
    train = np.sort(rng.choice(101, 40, replace=False))
    test = np.setdiff1d(np.arange(101), train)

    def observe(idx):
        x = pool[idx][:, None]
        sd = sim.noise_std(x)
        return x, sim.mean(x) + sd * rng.standard_normal(len(idx)), sd**2

    x, y, var = observe(train)
    xt, yt, vt = observe(test)
    spec = dict(SPEC, inputs=[{"name": "x", "lower": 0.0, "upper": 100.0}],
                pool={"type": "grid", "points_per_dim": 101}, pool_subsample=20, seed=3,
                mcmc={"chains": 2, "warmup": 40, "samples": 40, "thinning": 4})  # fmt: skip
    learned_spec = dict(spec, noise={"type": "learned"})
    grid = GridPool(dim=1, points_per_dim=101)
    nlpd = {}
    for name, s, labels, test_noise in (
        ("known", spec, _labels(x[:, 0], y, var), vt),
        ("learned", learned_spec, _labels(x[:, 0], y), None),
    ):
        model, _ = fitting.fit(s, grid, labels, exclude=set(train.tolist()))
        pred = answers.predict(s, model, labels, xt.tolist())
        sd = np.sqrt(np.array(pred["variance"]) + (0 if test_noise is None else test_noise))
        nlpd[name] = -norm(pred["mean"], sd).logpdf(yt).mean()
        metrics = answers.metrics(s, model, labels, xt.tolist(), yt.tolist(),
                                  None if test_noise is None else test_noise.tolist())  # fmt: skip
        nlpd[name + " nlml"] = metrics["nlml"]
        if name == "known":
            assert model["mode"]["noise"] < 0.05  # the nugget: little noise left to learn
    assert nlpd["known"] < nlpd["learned"] - 0.2, nlpd
    assert nlpd["known nlml"] < nlpd["learned nlml"] - 0.2, nlpd


def test_every_sampler_path_of_a_refit_sees_the_noise():
    """The refit's sampler, in one process (``posterior``) or in chain groups (``chains``), runs
    on the labels' noise: the same seed gives other draws without it, and the first draws of
    ``chains`` are those of ``posterior``."""
    x, y = [1.0, 3.0, 4.5, 6.0, 8.5], [0.3, 1.2, -0.4, 0.8, -1.0]
    spec = dict(SPEC, mcmc={"chains": 2, "warmup": 8, "samples": 6, "thinning": 2})
    data = fitting.prepare(spec, _labels(x, y, [0.5, 0.0, 0.2, 1.0, 0.1]))
    plain = dataclasses.replace(data, noise=None)
    draws, _ = fitting.chains(spec, data)
    assert not np.allclose(draws.theta, fitting.chains(spec, plain)[0].theta)
    post = fitting.posterior(spec, data, None)
    theta = draws.theta.reshape(-1, 2)
    noise = post.diagnostics["noise_floor"] + np.exp(theta[:, 1])
    assert np.allclose(post.log_draws().numpy(), np.column_stack([theta[:, 0], np.log(noise)]))


def test_the_campaign_page_draws_a_known_noise_model():
    """The page's plots of a known-noise model: the labels with their noise as error bars."""
    x, y, noise = [1.0, 3.0, 4.5, 6.0, 8.5], [0.3, 1.2, -0.4, 0.8, -1.0], [0.5, 0.0, 0.2, 1, 0.1]
    labels = _labels(x, y, noise)
    spec = dict(SPEC, mcmc={"chains": 2, "warmup": 8, "samples": 6, "thinning": 2})
    model, _ = fitting.fit(spec, GridPool(dim=1, points_per_dim=51), labels, exclude=set())
    for png in (views.model_png(spec, model, labels), views.posterior_png(spec, model)):
        assert png.startswith(b"\x89PNG")
