"""Contract tests shared by all acquisitions, and each one's definition checked directly; BALD's
mixture density against its plain quadrature; a batch over many candidates keeps its memory
bounded; a pending point enters a draw's GP with the nugget alone; and a batch of several outputs
(one output's is ``greedy_batch``'s, several start with the best combined score)."""

import math
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import integrate, stats

from fbgp_al.worker import acquisition, fitting, scoring
from fbgp_al.worker.acquisition import (
    ACQUISITIONS,
    evaluate,
    greedy_batch,
    greedy_batch_outputs,
    mixture_entropy,
)
from fbgp_al.worker.gp import predict
from fbgp_al.worker.mcmc import Posterior

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
    assert torch.allclose(
        evaluate("bald", single, u, z, cand), torch.zeros(len(cand), dtype=D), atol=1e-9
    )
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
    import fbgp_al.worker.gp as gp

    monkeypatch.setattr(gp, "CHUNK_ELEMENTS", 30 * 10 * 16)  # 16 candidates per chunk
    monkeypatch.setattr(acquisition, "QUADRATURE_ELEMENTS", 30 * 64 * 8)
    for name, values in whole.items():
        assert torch.allclose(evaluate(name, post, u, z, cand), values, atol=1e-12)


def test_greedy_batch_spreads_out_and_respects_pending(setting):
    from fbgp_al.worker.acquisition import greedy_batch

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


def _plain_mixture_entropy(mean, var):
    """The trapezoid rule on the same grid, each component's density written out."""
    sd = var.sqrt()
    out = torch.empty(mean.shape[1], dtype=D)
    for c in range(mean.shape[1]):
        lo = float((mean[:, c] - 8 * sd[:, c]).min())
        hi = float((mean[:, c] + 8 * sd[:, c]).max())
        needed = math.ceil((hi - lo) / float(sd[:, c].min())) + 1
        count = 2 ** math.ceil(math.log2(min(max(needed, 32), 16384)))
        y = torch.linspace(lo, hi, count, dtype=D)
        p = sum(
            torch.exp(-0.5 * ((y - m) / s) ** 2) / (s * math.sqrt(2 * math.pi))
            for m, s in zip(mean[:, c], sd[:, c], strict=True)
        ) / len(mean)
        f = torch.where(p > 0, -p * p.log(), 0.0)
        out[c] = (hi - lo) / (count - 1) * (f.sum() - 0.5 * (f[0] + f[-1]))
    return out


def test_mixture_entropy_equals_its_plain_quadrature_at_every_node_count():
    # spreads from overlapping components (32 nodes) to a narrow one far out (the 16384 cap)
    g = torch.Generator().manual_seed(4)
    cases = []
    for spread, narrow in ((0.1, 1.0), (3.0, 1.0), (30.0, 0.5), (300.0, 0.3), (1e4, 1e-2)):
        mean = spread * torch.randn(25, 6, generator=g, dtype=D)
        sd = torch.exp(torch.randn(25, 6, generator=g, dtype=D) * 0.3)
        sd[0] *= narrow
        cases.append((mean, sd**2))
    for mean, var in cases:
        want = _plain_mixture_entropy(mean, var)
        got = mixture_entropy(mean, var)
        assert torch.allclose(got, want, rtol=1e-12, atol=1e-10)


ROOT = Path(__file__).resolve().parents[2]
BATCH_MEMORY = """
import resource, torch
torch.set_num_threads(1)
from fbgp_al.worker.acquisition import greedy_batch
from fbgp_al.worker.mcmc import Posterior
g = torch.Generator().manual_seed(0)
D = torch.float64
u, z = torch.rand(10, 2, generator=g, dtype=D), torch.randn(10, generator=g, dtype=D)
post = Posterior(lengthscale=torch.full((150, 2), 0.3, dtype=D), noise=torch.full((150,), 0.01,
                 dtype=D), chains=5, mode_lengthscale=torch.full((2,), 0.3, dtype=D),
                 mode_noise=0.01)
candidates = torch.rand(200_000, 2, generator=g, dtype=D)
greedy_batch("b-qbc", post, u, z, candidates[:1000], 2)  # allocations of a first call
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
greedy_batch("qb-mgp", post, u, z, candidates, 2)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)
"""


def test_a_batch_over_many_candidates_keeps_its_memory_bounded():
    # 150 draws x 200,000 candidates (196 blocks of 1,024): 240 MB for each of the means and
    # the variances at once, over the bound together (1.5 GB grown here with the blocks and
    # chunks made as large as the candidates); block by block about 20 MB
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(BATCH_MEMORY)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    grew_mb = float(out.stdout.split()[-1])
    assert grew_mb < 400, f"peak memory grew by {grew_mb:.0f} MB"


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


def test_fantasies_in_a_greedy_batch_have_the_nugget_alone():
    """A pending point (its noise unknown) enters a draw's GP with ``s2`` only: ALM's score of
    the first pick is the variance given the labels (with their noise) and that fantasy."""
    u, z, noise = _data(6, 1, 11)
    cand = torch.linspace(0, 1, 21, dtype=D)[:, None]
    pending = torch.tensor([[0.5]], dtype=D)
    ls = torch.tensor([[0.2]], dtype=D)
    post = Posterior(
        lengthscale=ls,
        noise=torch.tensor([0.3], dtype=D),
        chains=1,
        mode_lengthscale=ls[0],
        mode_noise=0.3,
    )
    order, scores = greedy_batch(
        "alm",
        post,
        torch.tensor(u),
        torch.tensor(z),
        cand,
        1,
        pending,
        label_noise=torch.tensor(noise),
    )
    uu = np.concatenate([u, [[0.5]]])
    K = _kernel(uu, uu, np.array([0.2])) + np.diag(np.append(noise, 0.0)) + 0.3 * np.eye(7)
    k = _kernel(uu, cand.numpy(), np.array([0.2]))
    var = 1.0 - np.einsum("ij,ij->j", k, np.linalg.solve(K, k)) + 0.3
    assert int(order[0]) == int(np.argmax(var))
    assert float(scores[0]) == pytest.approx(var.max(), rel=1e-10)


SPEC = {
    "inputs": [{"name": "x", "lower": 0.0, "upper": 10.0}],
    "pool": {"type": "grid", "points_per_dim": 51},
    "pool_subsample": 40,
    "acquisition": "qb-mgp",
    "mcmc": {"chains": 2, "warmup": 20, "samples": 10, "thinning": 2},
    "seed": 7,
    "outputs": [{"name": "stress", "weight": 3.0}, {"name": "disp"}],
}
X = [0.5, 2.0, 3.5, 6.0, 8.5]


def _labels():
    return [
        {
            "x": [x],
            "y": {"stress": 1e5 * np.sin(x), "disp": 1e-4 * x**2},
            "index": None,
            "ticket": None,
        }
        for x in X
    ]


@pytest.mark.parametrize("name", ["qb-mgp", "b-qbc", "random"])
def test_a_batch_of_one_output_is_greedy_batchs(name):
    fits = fitting.fit_outputs(SPEC, _labels())
    f = fits[0]
    thin = f.post.thinned(2)
    candidates = torch.linspace(0, 1, 40, dtype=torch.float64)[:, None]
    pending = torch.tensor([[0.5]], dtype=torch.float64)
    one = greedy_batch_outputs(
        name, [(1.0, thin, f.data.u, f.data.z, None)], candidates, 4, pending, seed=f.data.seed
    )
    alone = greedy_batch(name, thin, f.data.u, f.data.z, candidates, 4, pending, seed=f.data.seed)
    assert torch.equal(one[0], alone[0]) and torch.equal(one[1], alone[1])


def test_a_batch_of_several_outputs_starts_with_the_best_combined_score():
    fits = fitting.fit_outputs(SPEC, _labels())
    candidates = torch.linspace(0, 1, 40, dtype=torch.float64)[:, None]
    thins = [f.post.thinned(2) for f in fits]
    parts = [(f.weight, t, f.data.u, f.data.z, None) for f, t in zip(fits, thins, strict=True)]
    order, scores = greedy_batch_outputs("qb-mgp", parts, candidates, 5)
    combined = scoring.combined_scores(
        "qb-mgp", [(f.weight, t, f.data) for f, t in zip(fits, thins, strict=True)], candidates
    )
    assert int(order[0]) == int(torch.argmax(combined))
    assert float(scores[0]) == pytest.approx(float(combined.max()), rel=1e-12)
    assert len(set(order.tolist())) == 5
    # a fantasy lowers the scores near it: each later pick scores at most its score before
    assert all(
        float(s) <= float(combined[i]) * (1 + 1e-12) for i, s in zip(order, scores, strict=True)
    )


@pytest.mark.parametrize(("n_draws", "n", "fit_elements"), [(150, 40, 1 << 24), (10, 30, 3 * 900)])
def test_draw_groups_cover_every_draw_once_within_the_buffer(monkeypatch, n_draws, n, fit_elements):
    """The draws' groups (every pass that factors them a group at a time) hold every draw once,
    in order, each group's factors within ``FIT_ELEMENTS`` (one draw a group at least)."""
    monkeypatch.setattr(acquisition, "FIT_ELEMENTS", fit_elements)
    groups = acquisition.draw_groups(n_draws, n)
    assert [i for g in groups for i in range(n_draws)[g]] == list(range(n_draws))
    assert all(len(range(n_draws)[g]) * n * n <= max(fit_elements, n * n) for g in groups)
    assert len(groups) == -(-n_draws * n * n // fit_elements)  # as few as the buffer allows
    monkeypatch.setattr(acquisition, "FIT_ELEMENTS", 1)
    assert len(acquisition.draw_groups(n_draws, n)) == n_draws
