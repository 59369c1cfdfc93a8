"""The paper's code's choices as campaign options: inputs scaled by the labels, the mode picked
by a KDE of the raw hyperparameters, BALD of the latent f, and its test NLML (the noise twice).
Each against an independent computation."""

import math

import numpy as np
import pytest
import torch
from scipy.special import logsumexp
from scipy.stats import lognorm, multivariate_normal, norm

from fbgp_al.worker import answers, fitting
from fbgp_al.worker.acquisition import evaluate
from fbgp_al.worker.mcmc import Posterior, sample_posterior
from fbgp_al.worker.mode import mode_index, raw_kde_mode_index
from fbgp_al.worker.potential import PRIOR_VARIANCE, GPPotential
from fbgp_al.worker.vocabulary.design import GridPool

SPEC = {
    "inputs": [
        {"name": "a", "lower": 0.0, "upper": 10.0},
        {"name": "b", "lower": -1.0, "upper": 1.0},
    ],
    "pool": {"type": "grid", "points_per_dim": 11},
    "pool_subsample": 50,
    "acquisition": "qb-mgp",
    "mcmc": {"chains": 2, "warmup": 40, "samples": 30, "thinning": 3, "init": "uniform"},
    "seed": 11,
}


def _data(n=9, seed=0):
    rng = np.random.default_rng(seed)
    x = np.column_stack([rng.uniform(2.0, 6.0, n), rng.uniform(-0.5, 0.3, n)])
    y = np.sin(x[:, 0]) + x[:, 1] ** 2 + 0.05 * rng.standard_normal(n)
    return x, y


def _labels(x, y):
    return [
        {"x": list(map(float, a)), "y": float(b), "index": None, "ticket": None}
        for a, b in zip(x, y, strict=True)
    ]


def _reference_kde_scores(values, bandwidth=0.3):
    """scikit-learn's KernelDensity(kernel="gaussian", bandwidth).score_samples, up to a
    constant."""
    return np.array([logsumexp(norm.logpdf(v, loc=values, scale=bandwidth).sum(1)) for v in values])


def test_the_raw_kde_mode_is_the_densest_draw_under_an_isotropic_kde():
    rng = np.random.default_rng(4)
    values = np.exp(rng.normal(0.0, 0.8, size=(700, 3)))
    assert raw_kde_mode_index(values) == int(np.argmax(_reference_kde_scores(values)))
    # non-finite rows never win, and the index is that of the full array
    values[:5] = np.inf
    assert raw_kde_mode_index(values) == 5 + int(np.argmax(_reference_kde_scores(values[5:])))


def test_the_raw_kde_rule_reads_lengthscales_in_the_units_of_their_priors():
    rng = np.random.default_rng(5)
    theta = rng.normal(0.0, 0.7, size=(400, 3))
    shift = np.array([math.log(0.2), math.log(0.5), 0.0])
    want = int(np.argmax(_reference_kde_scores(np.exp(theta - shift))))
    assert mode_index(theta, "kde-raw", prior_mean=shift) == want
    assert mode_index(theta, "kde-raw") == int(np.argmax(_reference_kde_scores(np.exp(theta))))
    # of more draws than the limit, the densest of a seeded sample of them
    picked = mode_index(theta, "kde-raw", limit=100, seed=3)
    again = mode_index(theta, "kde-raw", limit=100, seed=3)
    assert picked == again
    rows = np.sort(
        np.random.default_rng(np.random.SeedSequence(3, spawn_key=(2,))).choice(
            400, size=100, replace=False
        )
    )
    assert picked == rows[np.argmax(_reference_kde_scores(np.exp(theta[rows])))]
    with pytest.raises(ValueError, match="unknown mode rule"):
        mode_index(theta, "mean")


def test_a_prior_centred_on_log_r_is_the_potential_of_inputs_scaled_by_r():
    x, y = _data()
    u = (x - [0.0, -1.0]) / [10.0, 2.0]
    low, span = u.min(0), u.max(0) - u.min(0)
    scaled = (u - low) / span
    shift = np.concatenate([np.log(span), [0.0]])
    theta = np.random.default_rng(1).normal(0.0, 1.0, size=(6, 3))
    z = (y - y.mean()) / y.std()
    mine = GPPotential(u, z, prior_mean=shift)(theta + shift)
    theirs = GPPotential(scaled, z)(theta)
    np.testing.assert_allclose(mine[0], theirs[0], rtol=1e-10)
    np.testing.assert_allclose(mine[1], theirs[1], rtol=1e-8, atol=1e-10)


def test_a_refit_with_inputs_scaled_by_the_labels_samples_the_scaled_posterior():
    """The same seeded chains on the scaled inputs, moved by log r: the same draws, since the
    uniform start moves with the priors' means."""
    x, y = _data()
    spec = dict(SPEC, input_scaling="labels")
    data = fitting.prepare(spec, _labels(x, y))
    u = data.u.numpy()
    span = u.max(0) - u.min(0)
    np.testing.assert_allclose(data.input_scale, span, rtol=1e-12)
    post = fitting.posterior(spec, data, None)
    plain = sample_posterior(
        (u - u.min(0)) / span, data.z, 2, 40, 30, seed=data.seed, init="uniform"
    )
    np.testing.assert_allclose(
        post.lengthscale.numpy(), plain.lengthscale.numpy() * span, rtol=1e-6
    )
    np.testing.assert_allclose(post.noise.numpy(), plain.noise.numpy(), rtol=1e-6)
    model, _ = fitting.fit(spec, GridPool(dim=2, points_per_dim=11), _labels(x, y), exclude=set())
    assert model["input_scale"] == pytest.approx(span.tolist(), rel=1e-12)
    assert (
        "input_scale"
        not in fitting.fit(SPEC, GridPool(dim=2, points_per_dim=11), _labels(x, y), exclude=set())[
            0
        ]
    )


def test_inputs_that_do_not_vary_keep_the_box():
    spec = dict(SPEC, input_scaling="labels")
    data = fitting.prepare(spec, _labels(np.array([[3.0, 0.2], [5.0, 0.2]]), np.array([1.0, 2.0])))
    assert data.input_scale == pytest.approx([0.2, 1.0])


def test_the_paper_code_preset_picks_the_raw_kde_mode_of_all_draws():
    x, y = _data()
    spec = dict(SPEC, input_scaling="labels", mcmc=dict(SPEC["mcmc"], mode_rule="kde-raw"))
    data = fitting.prepare(spec, _labels(x, y))
    post = fitting.posterior(spec, data, None)
    raw = np.column_stack([post.lengthscale.numpy() / data.input_scale, post.noise.numpy()])
    best = int(np.argmax(_reference_kde_scores(raw)))
    assert post.mode_lengthscale.numpy() == pytest.approx(post.lengthscale.numpy()[best])
    assert post.mode_noise == pytest.approx(float(post.noise[best]))


def test_bald_code_is_the_log_of_the_mean_latent_sd():
    rng = np.random.default_rng(2)
    x, y = _data()
    u, z = torch.as_tensor((x - [0.0, -1.0]) / [10.0, 2.0]), torch.as_tensor(y - y.mean())
    post = Posterior(
        lengthscale=torch.as_tensor(np.exp(rng.normal(-1, 0.3, (8, 2)))),
        noise=torch.as_tensor(np.exp(rng.normal(-4, 0.5, 8))),
        chains=2,
        mode_lengthscale=torch.tensor([0.3, 0.3], dtype=torch.float64),
        mode_noise=0.02,
    )
    cand = torch.as_tensor(rng.uniform(size=(30, 2)))
    latent = []
    for ls, s2 in zip(post.lengthscale, post.noise, strict=True):
        k = np.exp(-0.5 * (((u.numpy()[:, None] - u.numpy()[None]) / ls.numpy()) ** 2).sum(-1))
        ks = np.exp(-0.5 * (((u.numpy()[:, None] - cand.numpy()[None]) / ls.numpy()) ** 2).sum(-1))
        solve = np.linalg.solve(k + float(s2) * np.eye(len(u)), ks)
        latent.append(np.sqrt(1.0 - (ks * solve).sum(0)))
    sf = np.array(latent)
    want = np.log(sf.mean(0)) - np.log(sf).mean(0)
    got = evaluate("bald-code", post, u, z, cand).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(evaluate("bald-std", post, u, z, cand).numpy(), got)


@pytest.mark.parametrize("scaling", ["box", "labels"])
def test_the_paper_nlml_counts_the_noise_twice_and_adds_the_modes_log_prior(scaling):
    x, y = _data(12, seed=3)
    spec = dict(SPEC, input_scaling=scaling)
    labels = _labels(x, y)
    model, _ = fitting.fit(spec, GridPool(dim=2, points_per_dim=11), labels, exclude=set())
    rng = np.random.default_rng(8)
    xt = np.column_stack([rng.uniform(0, 10, 40), rng.uniform(-1, 1, 40)])
    yt = np.sin(xt[:, 0]) + xt[:, 1] ** 2 + 0.05 * rng.standard_normal(40)
    got = answers.metrics(spec, model, labels, xt.tolist(), yt.tolist())
    # numpy/scipy: the mode GP's joint predictive of y, in standardized units
    t = model["transform"]
    to_u = lambda a: (a - [0.0, -1.0]) / [10.0, 2.0]  # noqa: E731
    u, ut = to_u(x), to_u(xt)
    z, zt = (y - t["y_mean"]) / t["y_std"], (yt - t["y_mean"]) / t["y_std"]
    ls, s2 = np.array(model["mode"]["lengthscale"]), model["mode"]["noise"]

    def k(a, b):
        return np.exp(-0.5 * (((a[:, None] - b[None]) / ls) ** 2).sum(-1))

    kinv = np.linalg.inv(k(u, u) + s2 * np.eye(len(u)))
    mean = k(ut, u) @ kinv @ z
    cov = k(ut, ut) - k(ut, u) @ kinv @ k(u, ut) + s2 * np.eye(len(ut))
    ours = -multivariate_normal(mean, cov).logpdf(zt) / len(zt)
    assert got["nlml"] == pytest.approx(ours, rel=1e-7)
    scale = np.array(model.get("input_scale", [1.0, 1.0]))
    prior = lognorm(s=math.sqrt(PRIOR_VARIANCE))
    # the noise's prior is on what lies above its floor (as Pyro's on the noise beside its jitter)
    floor = model["diagnostics"]["noise_floor"]
    log_prior = prior.logpdf(ls / scale).sum() + prior.logpdf(s2 - floor)
    twice = multivariate_normal(mean, cov + s2 * np.eye(len(ut))).logpdf(zt)
    assert got["nlml_paper"] == pytest.approx(-(twice + log_prior) / len(zt), rel=1e-7)
    assert got["nlml_paper"] != pytest.approx(got["nlml"], rel=1e-3)
