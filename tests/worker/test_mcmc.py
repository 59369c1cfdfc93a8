"""The NUTS posterior against the exact one: in 1-D the hyperparameter posterior is 2-D, so a
grid quadrature of the unnormalized density gives its marginals to high accuracy. Pyro's NUTS is
the reference sampler and must agree with the same quadrature."""

import math

import numpy as np
import pytest
import torch
from scipy.stats import gaussian_kde

from worker.gp import log_marginal_likelihood
from worker.mcmc import Posterior, posterior_mode_index, sample_posterior

D = torch.float64
QUANTILES = (0.05, 0.5, 0.95)


def _data(n: int, noise: float, seed: int):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.random(n))
    y = np.sin(2 * np.pi * 1.5 * x) + noise * rng.standard_normal(n)
    return torch.from_numpy(x[:, None]), torch.from_numpy((y - y.mean()) / y.std(ddof=1))


# few noisy points: a posterior with a heavy tail towards long lengthscales and high noise (the
# second mode of the paper's Figure 1); more points: a single, well-identified mode
DATASETS = {"two-modes": (8, 0.3, 7), "one-mode": (20, 0.1, 3)}


@pytest.fixture(scope="module", params=sorted(DATASETS))
def data_1d(request):
    return _data(*DATASETS[request.param])


@pytest.fixture(scope="module")
def one_mode():
    return _data(*DATASETS["one-mode"])


@pytest.fixture(scope="module")
def quadrature(data_1d):
    return _quadrature(*data_1d)


def _log_posterior_grid(u, z, log_l, log_s2):
    a, b = torch.meshgrid(log_l, log_s2, indexing="ij")
    lml = log_marginal_likelihood(u, z, a.reshape(-1, 1).exp(), b.reshape(-1).exp())
    prior = torch.distributions.Normal(0.0, math.sqrt(3.0))
    log_post = lml + prior.log_prob(a.reshape(-1)) + prior.log_prob(b.reshape(-1))
    return log_post.reshape(len(log_l), len(log_s2))


def _quadrature(u, z, size=300):
    """Means, sds and quantiles of (log l, log s2) under the exact posterior: a coarse grid finds
    where the mass is, a fine ``size x size`` grid over that box integrates it."""
    log_l, log_s2 = (
        torch.linspace(-24.0, 14.0, 250, dtype=D),
        torch.linspace(-25.0, 12.0, 200, dtype=D),
    )
    coarse = _log_posterior_grid(u, z, log_l, log_s2)
    assert (
        coarse[[0, -1]].max() < coarse.max() - 25 and coarse[:, [0, -1]].max() < coarse.max() - 25
    )
    mass = (coarse > coarse.max() - 25).nonzero()  # density above e^-25 of the peak
    lo, hi = mass.min(0).values - 1, mass.max(0).values + 1
    log_l = torch.linspace(float(log_l[lo[0]]), float(log_l[hi[0]]), size, dtype=D)
    log_s2 = torch.linspace(float(log_s2[lo[1]]), float(log_s2[hi[1]]), size, dtype=D)
    weights = torch.exp(_log_posterior_grid(u, z, log_l, log_s2) - coarse.max())
    weights /= weights.sum()
    out = {}
    for name, axis, values in (("log_l", 1, log_l.numpy()), ("log_s2", 0, log_s2.numpy())):
        marginal = weights.sum(axis).numpy()
        cdf = np.cumsum(marginal) - 0.5 * marginal  # midpoint rule
        mean = float((marginal * values).sum())
        sd = float(np.sqrt((marginal * (values - mean) ** 2).sum()))
        quantiles = [float(np.interp(q, cdf, values)) for q in QUANTILES]
        out[name] = {"mean": mean, "sd": sd, "quantiles": quantiles}
    return out


def _assert_matches(log_draws: np.ndarray, quadrature: dict, tol_mean: float, tol_q: float):
    for j, name in enumerate(("log_l", "log_s2")):
        exact = quadrature[name]
        x = log_draws[:, j]
        assert abs(x.mean() - exact["mean"]) < tol_mean * exact["sd"], name
        for q, value in zip(QUANTILES, exact["quantiles"], strict=True):
            assert abs(np.quantile(x, q) - value) < tol_q * exact["sd"], (name, q)


def test_nuts_marginals_match_grid_quadrature(data_1d, quadrature):
    u, z = data_1d
    post = sample_posterior(u, z, chains=4, warmup=300, samples=1500, seed=0)
    assert post.diagnostics["max_rhat"] < 1.02
    assert post.diagnostics["min_ess_bulk"] > 800
    _assert_matches(post.log_draws().numpy(), quadrature, tol_mean=0.1, tol_q=0.15)


def test_quadrature_check_catches_a_wrong_posterior(one_mode):
    """The check has teeth: draws of a sampler whose prior were N(0, 1) instead of N(0, 3) on the
    logs fail it."""
    u, z = one_mode
    import worker.potential as potential

    original = potential.PRIOR_VARIANCE
    try:
        potential.PRIOR_VARIANCE = 1.0
        wrong = sample_posterior(u, z, chains=4, warmup=300, samples=1500, seed=0)
    finally:
        potential.PRIOR_VARIANCE = original
    with pytest.raises(AssertionError):
        _assert_matches(wrong.log_draws().numpy(), _quadrature(u, z), tol_mean=0.1, tol_q=0.15)


def test_pyro_reference_sampler_matches_the_same_quadrature(one_mode):
    """On the one-mode posterior: two short Pyro chains cannot weigh two modes reliably."""
    import pyro
    from pyro.infer import MCMC, NUTS

    u, z = one_mode
    prior = torch.distributions.Normal(torch.zeros((), dtype=D), math.sqrt(3.0))

    def potential_fn(params):
        theta = params["theta"]
        lml = log_marginal_likelihood(u, z, theta[:1].exp()[None], theta[1:].exp())
        return -(lml.sum() + prior.log_prob(theta).sum())

    draws = []
    for chain in range(2):  # one after another, as the paper's reference path runs them
        pyro.set_rng_seed(chain)
        kernel = NUTS(potential_fn=potential_fn, target_accept_prob=0.8)
        mcmc = MCMC(kernel, num_samples=1000, warmup_steps=300, disable_progbar=True,
                    initial_params={"theta": torch.zeros(2, dtype=D)})  # fmt: skip
        mcmc.run()
        draws.append(mcmc.get_samples()["theta"].numpy())
    _assert_matches(np.concatenate(draws), _quadrature(u, z), tol_mean=0.15, tol_q=0.2)


def test_draw_layout_thinning_and_serialization():
    g = torch.Generator().manual_seed(3)
    u = torch.rand(12, 2, generator=g, dtype=D)
    z = torch.sin(5 * u).sum(1)
    z = (z - z.mean()) / z.std()
    post = sample_posterior(u, z, chains=3, warmup=40, samples=20, seed=1)
    assert post.lengthscale.shape == (60, 2) and post.noise.shape == (60,)
    assert post.lengthscale.dtype == D and (post.lengthscale > 0).all() and (post.noise > 0).all()
    thin = post.thinned(10)
    assert thin.lengthscale.shape == (6, 2)
    # chain-major: thinned rows are draws 9 and 19 of each chain
    rows = [9, 19, 29, 39, 49, 59]
    assert torch.equal(thin.noise, post.noise[rows])
    assert thin.mode_noise == post.mode_noise
    again = Posterior.from_dict(post.to_dict())
    assert torch.equal(again.lengthscale, post.lengthscale) and again.chains == 3
    assert again.diagnostics == post.diagnostics
    d = post.diagnostics
    assert set(d["rhat"]) == {"lengthscale_0", "lengthscale_1", "noise"}
    assert set(d["ess_bulk"]) == set(d["rhat"])
    for key in ("divergences", "accept_mean", "step_size", "seconds", "gradient_evaluations"):
        assert key in d
    assert 0 < d["accept_mean"] <= 1 and len(d["step_size"]) == 3


def test_same_seed_same_posterior():
    u = torch.linspace(0, 1, 6, dtype=D)[:, None]
    z = torch.tensor([0.0, 1.0, 0.5, -0.5, -1.0, 0.2], dtype=D)
    a = sample_posterior(u, z, chains=2, warmup=30, samples=10, seed=4)
    b = sample_posterior(u, z, chains=2, warmup=30, samples=10, seed=4)
    c = sample_posterior(u, z, chains=2, warmup=30, samples=10, seed=5)
    assert torch.equal(a.lengthscale, b.lengthscale) and torch.equal(a.noise, b.noise)
    assert not torch.equal(a.noise, c.noise)


def test_mode_is_the_draw_of_highest_kde_density():
    rng = np.random.default_rng(0)
    # two clusters, the larger one holds the mode
    draws = np.concatenate([rng.normal(0, 0.3, (300, 2)), rng.normal(3, 0.3, (100, 2))])
    index = posterior_mode_index(draws)
    density = gaussian_kde(draws.T)(draws.T)
    assert index == int(np.argmax(density))
    assert np.linalg.norm(draws[index]) < 1.0


def test_mode_of_degenerate_draws_does_not_crash():
    draws = np.tile([[0.1, -2.0]], (50, 1))
    assert posterior_mode_index(draws) == 0


def test_warm_start_from_the_previous_posterior_is_still_right(one_mode):
    u, z = one_mode
    previous = sample_posterior(u[:-1], z[:-1], chains=4, warmup=300, samples=300, seed=1)
    warm = sample_posterior(u, z, chains=4, warmup=300, samples=1500, seed=2,
                            warm_start=previous.adaptation, warm_warmup=50)  # fmt: skip
    assert warm.diagnostics["warm_start"] == "warm"
    _assert_matches(warm.log_draws().numpy(), _quadrature(u, z), tol_mean=0.1, tol_q=0.15)
    cold = sample_posterior(u, z, chains=4, warmup=300, samples=1500, seed=2)
    # the point of it: fewer gradient evaluations than a cold start
    assert warm.diagnostics["gradient_evaluations"] < cold.diagnostics["gradient_evaluations"]


def test_warm_start_falls_back_to_cold_when_it_cannot_be_trusted(one_mode):
    u, z = one_mode
    previous = sample_posterior(u, z, chains=2, warmup=100, samples=100, seed=1)
    unmixed = dict(previous.adaptation, max_rhat=1.3)
    post = sample_posterior(u, z, chains=2, warmup=100, samples=100, seed=1, warm_start=unmixed)
    assert post.diagnostics["warm_start"].startswith("cold")
    # a wrecked adaptation (chains far apart, a step size that cannot move them) is redone cold
    wrecked = dict(previous.adaptation, last=[[-8.0, -8.0], [8.0, 6.0]], step_size=[1e-6, 1e-6])
    post = sample_posterior(u, z, chains=2, warmup=100, samples=100, seed=1, warm_start=wrecked,
                            warm_warmup=0)  # fmt: skip
    assert post.diagnostics["warm_start"].startswith("redone cold")
    assert post.diagnostics["max_rhat"] < 1.1
    mismatched = dict(previous.adaptation, last=[[0.0, 0.0, 0.0]] * 2)
    post = sample_posterior(u, z, chains=2, warmup=50, samples=50, seed=1, warm_start=mismatched)
    assert post.diagnostics["warm_start"].startswith("cold")


def test_grid_start_finds_the_main_mode_that_the_uniform_box_misses():
    """60 noisy points of Gramacy & Lee's function: the oscillating fit (log l ~ -3.2) has e^15
    times the density of the smooth, noisy one (log l ~ -1.6) that chains started uniformly in
    [-2, 2] stay in."""
    from clients.simulators import get_simulator

    sim = get_simulator("gramacy1d")
    rng = np.random.default_rng(0)
    x = np.linspace(0.5, 2.5, 101)[rng.choice(101, 60, replace=False)][:, None]
    y = sim.sample(x, rng)
    u, z = (x - 0.5) / 2, (y - y.mean()) / y.std(ddof=1)
    uniform = sample_posterior(u, z, chains=3, warmup=100, samples=100, seed=0, init="uniform")
    grid = sample_posterior(u, z, chains=3, warmup=100, samples=100, seed=0, init="grid")
    assert (uniform.log_draws()[:, 0] > -2.5).all()  # every chain in the minor mode
    assert (grid.log_draws()[:, 0] < -2.5).all()  # every chain in the main one
    with pytest.raises(ValueError, match="unknown init"):
        sample_posterior(u, z, chains=1, warmup=5, samples=5, init="prior")
