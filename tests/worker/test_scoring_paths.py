"""The fast scoring paths give what the plain formulas give: variances by a triangular solve
against a product with the explicit inverse factor, B-QBC from the means alone, and candidates
scored in parts (on other workers) the scores of the whole."""

import math

import pytest
import torch

from fbgp_al.worker import gp
from fbgp_al.worker.acquisition import (
    DrawGPs,
    batch_scores,
    evaluate,
    greedy_batch,
    greedy_batch_outputs,
)
from fbgp_al.worker.mcmc import Posterior
from tests.worker.test_acquisition import _plain_mixture_entropy

D = torch.float64


@pytest.fixture(scope="module")
def setting():
    g = torch.Generator().manual_seed(11)
    u = torch.rand(60, 4, generator=g, dtype=D)
    z = torch.sin(3 * u).sum(1) + 0.1 * torch.randn(60, generator=g, dtype=D)
    z = (z - z.mean()) / z.std()
    post = Posterior(
        lengthscale=torch.exp(torch.randn(40, 4, generator=g, dtype=D) * 0.3 - 0.5),
        noise=torch.exp(torch.randn(40, generator=g, dtype=D) * 0.5 - 4.0),
        chains=4,
        mode_lengthscale=torch.full((4,), 0.6, dtype=D),
        mode_noise=0.02,
    )
    candidates = torch.rand(700, 4, generator=g, dtype=D)
    return post, u, z, candidates


def _plain_predict(u, z, lengthscale, noise, candidates):
    """Means and variances of y written out: the kernel from distances, ``L^-1`` explicitly."""
    rows = []
    for ls, s2 in zip(lengthscale, noise, strict=True):
        k = torch.exp(-0.5 * torch.cdist(u / ls, u / ls) ** 2) + s2 * torch.eye(len(u), dtype=D)
        chol_inv = torch.linalg.inv(torch.linalg.cholesky(k))
        k_star = torch.exp(-0.5 * torch.cdist(u / ls, candidates / ls) ** 2)
        mean = k_star.T @ torch.cholesky_solve(z[:, None], torch.linalg.cholesky(k))[:, 0]
        var = 1.0 - ((chol_inv @ k_star) ** 2).sum(0) + s2
        rows.append((mean, var))
    return torch.stack([r[0] for r in rows]), torch.stack([r[1] for r in rows])


def test_each_acquisition_equals_its_plain_formula(setting):
    post, u, z, cand = setting
    mean, var = _plain_predict(u, z, post.lengthscale, post.noise, cand)
    mode = post.mode()
    _, mode_var = _plain_predict(u, z, mode.lengthscale, mode.noise, cand)
    b_alm, b_qbc = var.mean(0), mean.var(0, correction=0)
    sf = (var - post.noise[:, None]).sqrt()
    entropies = 0.5 * torch.log(2 * math.pi * math.e * var)
    want = {
        "alm": mode_var[0],
        "b-alm": b_alm,
        "b-qbc": b_qbc,
        "qb-mgp": b_alm + b_qbc,
        "bald-std": sf.mean(0).log() - sf.log().mean(0),
        "bald": _plain_mixture_entropy(mean, var) - entropies.mean(0),
    }
    for name, values in want.items():
        got = evaluate(name, post, u, z, cand)
        assert torch.allclose(got, values, rtol=0, atol=1e-10), name


def test_means_only_acquisitions_never_compute_a_variance(setting, monkeypatch):
    post, u, z, cand = setting
    asked = []
    predict_chunk = gp.Conditioned.predict_chunk

    def spy(self, candidates, buffers=None, variance=True, out=None):
        asked.append(variance)
        return predict_chunk(self, candidates, buffers, variance, out)

    monkeypatch.setattr(gp.Conditioned, "predict_chunk", spy)
    mean, _ = _plain_predict(u, z, post.lengthscale, post.noise, cand)
    b_qbc = evaluate("b-qbc", post, u, z, cand)
    assert torch.allclose(b_qbc, mean.var(0, correction=0), rtol=0, atol=1e-10)
    assert asked and not any(asked)
    # a batch: fantasies change no mean, so the picks are the best scores in order
    order, scores = greedy_batch("b-qbc", post, u, z, cand, 4, pending=cand[:2])
    top = torch.argsort(b_qbc, descending=True, stable=True)[:4]
    assert order.tolist() == top.tolist() and torch.allclose(scores, b_qbc[top], atol=1e-12)
    assert not any(asked)
    asked.clear()
    evaluate("qb-mgp", post, u, z, cand)
    assert asked and all(asked)
    mean_only, none = DrawGPs(u, z, post.lengthscale, post.noise).predict(cand, variance=False)
    assert none is None and torch.allclose(mean_only, mean, rtol=0, atol=1e-10)


@pytest.mark.parametrize("name", ["alm", "b-alm", "b-qbc", "qb-mgp", "bald", "bald-code"])
def test_scores_in_parts_are_the_scores_of_the_whole(setting, name):
    """Each candidate's score depends on it alone, so candidates scored in parts (on other
    workers) give the same scores and the same batch, with points out as fantasies too."""
    post, u, z, candidates = setting
    pending = candidates[:3]
    parts = [(1.0, post, u, z, None)]
    whole = batch_scores(name, parts, candidates, pending)
    split = torch.cat(
        [batch_scores(name, parts, c, pending) for c in torch.tensor_split(candidates, 3)]
    )
    torch.testing.assert_close(split, whole, rtol=1e-10, atol=1e-12)
    alone = evaluate(name, post, u, z, candidates)
    torch.testing.assert_close(
        torch.cat([evaluate(name, post, u, z, c) for c in torch.tensor_split(candidates, 3)]),
        alone,
        rtol=1e-10,
        atol=1e-12,
    )
    batch = greedy_batch(name, post, u, z, candidates, 5, pending)
    given = greedy_batch_outputs(name, parts, candidates, 5, pending, scores=split)
    assert batch[0].tolist() == given[0].tolist()
    torch.testing.assert_close(given[1], batch[1], rtol=1e-10, atol=1e-12)
