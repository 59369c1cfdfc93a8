"""Contract tests shared by all acquisitions, and each one's definition checked directly."""

import math

import numpy as np
import pytest
import torch
from scipy import integrate, stats

from worker import acquisition
from worker.acquisition import ACQUISITIONS, evaluate, mixture_entropy
from worker.gp import predict
from worker.mcmc import Posterior

D = torch.float64


@pytest.fixture(scope="module")
def setting():
    g = torch.Generator().manual_seed(0)
    u = torch.rand(10, 2, generator=g, dtype=D)
    z = torch.sin(5 * u).sum(1)
    z = (z - z.mean()) / z.std()
    post = Posterior(
        lengthscale=torch.exp(torch.randn(30, 2, generator=g, dtype=D) * 0.5 - 1.0),
        noise=torch.exp(torch.randn(30, generator=g, dtype=D) - 4.0),
        chains=3,
        mode_lengthscale=torch.tensor([0.35, 0.4], dtype=D),
        mode_noise=0.02,
    )
    candidates = torch.rand(257, 2, generator=g, dtype=D)
    return post, u, z, candidates


@pytest.mark.parametrize("name", ACQUISITIONS)
def test_shape_dtype_finite_and_order_invariant(setting, name):
    post, u, z, cand = setting
    values = evaluate(name, post, u, z, cand)
    assert values.shape == (len(cand),) and values.dtype == D
    assert torch.isfinite(values).all()
    if name != "random":  # random scores are random by definition
        perm = torch.randperm(len(cand), generator=torch.Generator().manual_seed(1))
        assert torch.allclose(evaluate(name, post, u, z, cand[perm]), values[perm], atol=1e-12)


def test_variance_based_acquisitions_are_their_definitions(setting):
    post, u, z, cand = setting
    mean, var = predict(u, z, post.lengthscale, post.noise, cand)  # M x m
    b_alm = evaluate("b-alm", post, u, z, cand)
    b_qbc = evaluate("b-qbc", post, u, z, cand)
    assert torch.allclose(b_alm, var.mean(0))
    centred = mean - mean.mean(0)
    assert torch.allclose(b_qbc, (centred**2).sum(0) / len(mean))  # population variance
    assert torch.allclose(evaluate("qb-mgp", post, u, z, cand), b_alm + b_qbc, atol=1e-14)
    _, mode_var = predict(u, z, post.mode_lengthscale[None], torch.tensor([0.02], dtype=D), cand)
    assert torch.allclose(evaluate("alm", post, u, z, cand), mode_var[0])


def test_bald_is_non_negative_and_zero_for_a_single_model(setting):
    post, u, z, cand = setting
    assert (evaluate("bald", post, u, z, cand) >= -1e-10).all()
    single = post.mode()
    assert torch.allclose(evaluate("bald", single, u, z, cand), torch.zeros(len(cand), dtype=D),
                          atol=1e-9)  # fmt: skip
    # identical draws: no disagreement at all
    assert torch.allclose(evaluate("b-qbc", single, u, z, cand), torch.zeros(len(cand), dtype=D))


def test_mixture_entropy_matches_adaptive_quadrature():
    rng = np.random.default_rng(5)
    cases = [
        (rng.normal(0, 1, 7), rng.uniform(0.5, 2, 7)),  # overlapping components
        (np.array([-30.0, 0.0, 40.0]), np.array([0.01, 1.0, 3.0])),  # far apart, very different
        (np.array([1.0]), np.array([0.3])),  # a single Gaussian
    ]
    for means, sds in cases:

        def density(y, means=means, sds=sds):
            return stats.norm.pdf(y, means, sds).mean()

        def integrand(y, density=density):
            p = density(y)
            return -p * math.log(p) if p > 0 else 0.0

        points = sorted(means)
        expected = sum(
            integrate.quad(integrand, a, b, limit=400, epsabs=1e-13)[0]
            for a, b in zip(
                [points[0] - 12 * sds.max()] + points,
                points + [points[-1] + 12 * sds.max()],
                strict=True,
            )
        )
        mean_t = torch.tensor(means, dtype=D)[:, None]
        var_t = torch.tensor(sds**2, dtype=D)[:, None]
        assert mixture_entropy(mean_t, var_t).item() == pytest.approx(expected, abs=1e-6)
    one = mixture_entropy(torch.tensor([[1.0]], dtype=D), torch.tensor([[0.09]], dtype=D))
    assert one.item() == pytest.approx(0.5 * math.log(2 * math.pi * math.e * 0.09), abs=1e-10)


def test_bald_quadrature_nodes_are_bounded():
    # a component 1e6 times narrower than the spread: the node count is capped, not exploding
    mean = torch.tensor([[0.0], [1e4]], dtype=D)
    var = torch.tensor([[1e-4], [1.0]], dtype=D)
    value = mixture_entropy(mean, var)
    assert torch.isfinite(value).all()
    assert acquisition.QUADRATURE_MAX_NODES <= 2**14


def test_random_is_seeded_and_unknown_names_are_rejected(setting):
    post, u, z, cand = setting
    a = evaluate("random", post, u, z, cand, seed=3)
    assert torch.equal(a, evaluate("random", post, u, z, cand, seed=3))
    assert not torch.equal(a, evaluate("random", post, u, z, cand, seed=4))
    with pytest.raises(ValueError, match="unknown acquisition"):
        evaluate("ucb", post, u, z, cand)


def test_chunked_scoring_equals_unchunked(setting, monkeypatch):
    post, u, z, cand = setting
    whole = {name: evaluate(name, post, u, z, cand) for name in ("qb-mgp", "bald")}
    import worker.gp as gp

    monkeypatch.setattr(gp, "CHUNK_ELEMENTS", 30 * 10 * 16)  # 16 candidates per chunk
    monkeypatch.setattr(acquisition, "QUADRATURE_ELEMENTS", 30 * 64 * 8)
    for name, values in whole.items():
        assert torch.allclose(evaluate(name, post, u, z, cand), values, atol=1e-12)


def test_greedy_batch_spreads_out_and_respects_pending(setting):
    from worker.acquisition import greedy_batch

    post, u, z, _ = setting
    cand = torch.rand(400, 2, generator=torch.Generator().manual_seed(9), dtype=D)
    plain = evaluate("qb-mgp", post, u, z, cand)
    order, scores = greedy_batch("qb-mgp", post, u, z, cand, 6)
    assert len(set(order.tolist())) == 6
    assert int(order[0]) == int(torch.argmax(plain)) and scores[0] == pytest.approx(
        float(plain.max())
    )
    # fantasies lower the variance near each pick, so the batch spreads out more than the top 6
    top = torch.argsort(plain, descending=True)[:6]
    assert torch.pdist(cand[order]).min() > torch.pdist(cand[top]).min()
    assert (scores[1:] <= plain[order[1:]] + 1e-12).all()  # a fantasy never raises a score
    # a pending input at the best candidate: the batch starts elsewhere, away from it
    pending_order, _ = greedy_batch("qb-mgp", post, u, z, cand, 3, pending=cand[top[0]][None])
    assert int(pending_order[0]) != int(top[0])
    # B-QBC scores only disagreement of the means, which fantasies leave as they are
    qbc_order, qbc_scores = greedy_batch("b-qbc", post, u, z, cand, 3)
    qbc = evaluate("b-qbc", post, u, z, cand)
    assert torch.allclose(qbc_scores, qbc[qbc_order]) and int(qbc_order[0]) == int(
        torch.argmax(qbc)
    )


def test_bald_std_is_the_log_of_mean_latent_sd_shortcut_and_ignores_the_means(setting):
    """``bald-std`` (the paper's code's BALD): log mean_m sf_m - mean_m log sf_m, sf the latent
    sd; unchanged when the labels (and so the means) change, unlike the exact ``bald``."""
    post, u, z, cand = setting
    _, var = predict(u, z, post.lengthscale, post.noise, cand)
    sf = (var - post.noise[:, None]).sqrt()
    expected = sf.mean(0).log() - sf.log().mean(0)
    values = evaluate("bald-std", post, u, z, cand)
    assert torch.allclose(values, expected, atol=1e-12) and (values >= -1e-12).all()
    flipped = evaluate("bald-std", post, u, -3 * z, cand)
    assert torch.allclose(flipped, values, atol=1e-12)
    assert not torch.allclose(
        evaluate("bald", post, u, -3 * z, cand), evaluate("bald", post, u, z, cand)
    )
