"""Scoring, predictions and test metrics in blocks of candidates and groups of draws give what
one pass over everything gives."""

import math

import numpy as np
import pytest
import torch

from fbgp_al.worker import acquisition, answers
from fbgp_al.worker.acquisition import ACQUISITIONS, evaluate, greedy_batch, scorer
from fbgp_al.worker.gp import Conditioned, predictive_covariance
from fbgp_al.worker.mcmc import Posterior

D = torch.float64


@pytest.fixture(scope="module")
def setting():
    g = torch.Generator().manual_seed(3)
    u = torch.rand(25, 3, generator=g, dtype=D)
    z = torch.sin(4 * u).sum(1)
    z = (z - z.mean()) / z.std()
    post = Posterior(
        lengthscale=torch.exp(torch.randn(40, 3, generator=g, dtype=D) * 0.4 - 0.8),
        noise=torch.exp(torch.randn(40, generator=g, dtype=D) - 4.0),
        chains=4,
        mode_lengthscale=torch.tensor([0.4, 0.5, 0.45], dtype=D),
        mode_noise=0.02,
    )
    candidates = torch.rand(1500, 3, generator=g, dtype=D)
    pending = torch.rand(5, 3, generator=g, dtype=D)
    return post, u, z, candidates, pending


@pytest.fixture
def small_blocks(monkeypatch):
    """Draws fitted 7 at a time and blocks of a few candidates: many groups and blocks."""
    monkeypatch.setattr(acquisition, "FIT_ELEMENTS", 7 * 25**2)
    monkeypatch.setattr(acquisition, "BLOCK_ELEMENTS", 40 * 64)


def _unchunked(name, post, u, z, candidates):
    """The acquisition in one pass: every draw, every candidate at once."""
    if name == "alm":
        post = post.mode()
    mean, var = Conditioned.fit(u, z, post.lengthscale, post.noise).predict_chunk(candidates)
    return scorer(name, post.noise)(mean, var)


def _unchunked_batch(name, post, u, z, candidates, size, pending, shortlist=1000):
    """The greedy batch with every draw's predictions at every candidate held at once."""
    if name == "alm":
        post = post.mode()
    score = scorer(name, post.noise)

    def fit(inputs):
        zs = torch.cat([z, torch.zeros(len(inputs), dtype=D)])
        return Conditioned.fit(torch.cat([u, inputs]), zs, post.lengthscale, post.noise)

    means = fit(u[:0]).predict_chunk(candidates)[0]
    scores = score(means, fit(pending).predict_chunk(candidates)[1])
    short = torch.argsort(scores, descending=True, stable=True)[:shortlist]
    current, fantasies, picked, values = scores[short], pending, [], []
    available = torch.ones(len(short), dtype=torch.bool)
    for _ in range(size):
        best = int(torch.argmax(torch.where(available, current, -torch.inf)))
        picked.append(int(short[best]))
        values.append(float(current[best]))
        available[best] = False
        fantasies = torch.cat([fantasies, candidates[short[best]][None]])
        current = score(means[:, short], fit(fantasies).predict_chunk(candidates[short])[1])
    return picked, values


@pytest.mark.parametrize("name", [a for a in ACQUISITIONS if a != "random"])
def test_scoring_in_blocks_and_groups_equals_one_pass(setting, small_blocks, name):
    post, u, z, cand, _ = setting
    chunked = evaluate(name, post, u, z, cand)
    assert torch.allclose(chunked, _unchunked(name, post, u, z, cand), rtol=0, atol=1e-10)


@pytest.mark.parametrize("name", ["b-qbc", "qb-mgp", "bald"])
def test_a_batch_in_blocks_equals_one_pass(setting, monkeypatch, name):
    post, u, z, cand, pending = setting
    want_order, want_scores = _unchunked_batch(name, post, u, z, cand, 4, pending, shortlist=300)
    for fit_elements, block_elements in ((1 << 24, 1 << 22), (7 * 30**2, 40 * 64)):
        monkeypatch.setattr(acquisition, "FIT_ELEMENTS", fit_elements)
        monkeypatch.setattr(acquisition, "BLOCK_ELEMENTS", block_elements)
        order, scores = greedy_batch(name, post, u, z, cand, 4, pending, shortlist=300)
        assert order.tolist() == want_order
        assert np.allclose(scores.numpy(), want_scores, rtol=0, atol=1e-10)


def test_predictions_and_metrics_in_blocks_equal_one_pass(setting, small_blocks):
    post, u, z, cand, _ = setting
    model = {"n_labeled": len(z), "chains": post.chains, **_model_of(post)}
    labels = [{"x": row.tolist(), "y": float(v)} for row, v in zip(u, z, strict=True)]
    x = cand[:300].tolist()
    pred = answers.predict(SPEC, model, labels, x)
    mean, var = Conditioned.fit(u, z, post.lengthscale, post.noise).predict_chunk(cand[:300])
    assert np.allclose(pred["mixture_mean"], mean.mean(0).numpy(), rtol=0, atol=1e-10)
    want = var.mean(0) + mean.var(0, correction=0)
    assert np.allclose(pred["mixture_variance"], want.numpy(), rtol=0, atol=1e-10)

    y = torch.sin(4 * cand[:300]).sum(1)
    got = answers.metrics(SPEC, model, labels, x, y.tolist())
    mode = post.mode()
    m, cov = predictive_covariance(u, z, mode.lengthscale, mode.noise, cand[:300])
    want_nlml = -torch.distributions.MultivariateNormal(m[0], cov[0]).log_prob(y) / 300
    assert got["nlml"] == pytest.approx(float(want_nlml), abs=1e-10)
    log_density = -0.5 * ((y - mean) ** 2 / var + torch.log(2 * math.pi * var))
    want_nlpd = -(torch.logsumexp(log_density, 0) - math.log(len(mean))).mean()
    assert got["nlpd_mixture"] == pytest.approx(float(want_nlpd), abs=1e-10)


# the campaign of the model below: three inputs in the unit cube
SPEC = {"inputs": [{"name": f"x{i}", "lower": 0.0, "upper": 1.0} for i in range(3)]}


def _model_of(post: Posterior) -> dict:
    draws = {"lengthscale": post.lengthscale.tolist(), "noise": post.noise.tolist()}
    return {
        "samples": draws,
        "acquisition_samples": draws,
        "mode": {"lengthscale": post.mode_lengthscale.tolist(), "noise": post.mode_noise},
        "transform": {"lower": [0.0] * 3, "upper": [1.0] * 3, "y_mean": 0.0, "y_std": 1.0},
    }


def _per_block(name, post, u, z, candidates, block, per, pending=None):
    """Each block of candidates scored with each group of ``per`` draws fitted for it (the
    variances with the ``pending`` inputs as fantasies, if any)."""
    groups = [slice(j, j + per) for j in range(0, len(post.noise), per)]
    u_var, z_var = u, z
    if pending is not None:
        u_var, z_var = torch.cat([u, pending]), torch.cat([z, torch.zeros(len(pending), dtype=D)])
    out = []
    for i in range(0, len(candidates), block):
        at = candidates[i : i + block]
        mean = torch.cat(
            [
                Conditioned.fit(u, z, post.lengthscale[g], post.noise[g]).predict(at)[0]
                for g in groups
            ]
        )
        var = torch.cat(
            [
                Conditioned.fit(u_var, z_var, post.lengthscale[g], post.noise[g]).predict(at)[1]
                for g in groups
            ]
        )
        out.append(scorer(name, post.noise)(mean, var))
    return torch.cat(out)


@pytest.mark.parametrize("name", ["qb-mgp", "bald", "b-qbc"])
def test_groups_are_fitted_once_per_span_with_the_bits_of_a_fit_per_block(
    setting, small_blocks, monkeypatch, name
):
    post, u, z, cand, pending = setting
    fits = []
    real = Conditioned.fit.__func__

    def counted(cls, *args, **kwargs):
        fits.append(len(args[3]))
        return real(cls, *args, **kwargs)

    gps = acquisition.DrawGPs(u, z, post.lengthscale, post.noise)
    with_pending = acquisition.DrawGPs(torch.cat([u, pending]), z, post.lengthscale, post.noise)
    block, spans = gps.block, math.ceil(len(cand) / (4 * gps.block))
    want = _per_block(name, post, u, z, cand, block, 7)
    want_batch = _per_block(name, post, u, z, cand, block, 7, pending)
    monkeypatch.setattr(acquisition, "SPAN_ELEMENTS", 40 * block * 4)  # 4 blocks a span
    monkeypatch.setattr(Conditioned, "fit", classmethod(counted))

    assert torch.equal(evaluate(name, post, u, z, cand), want)
    assert len(fits) == spans * len(gps.groups)  # once a span, not once a block
    fits.clear()
    batch = acquisition.batch_scores(name, [(1.0, post, u, z, None)], cand, pending)
    assert torch.equal(batch, want if name == "b-qbc" else want_batch)
    fantasies = 0 if name == "b-qbc" else len(with_pending.groups)  # 30 labels: 4 a group
    assert len(fits) == spans * (len(gps.groups) + fantasies)
