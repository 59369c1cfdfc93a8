"""A greedy batch's fantasies by conditioning (:mod:`worker.fantasies`): the variances after
each pick equal those of the draws' GPs refitted with the picks as fantasies, with points out
and known label noise too, and from ``CONDITIONED_FROM`` labels a greedy batch picks as the
refits do."""

import numpy as np
import pytest
import torch

from fbgp_al.worker import acquisition, gp
from fbgp_al.worker.acquisition import DrawGPs, _gps_with, greedy_batch_outputs
from fbgp_al.worker.fantasies import Fantasized
from fbgp_al.worker.mcmc import Posterior

D = torch.float64


def _setting(n=40, draws=6, seed=0, known=False):
    rng = np.random.default_rng(seed)
    u = torch.from_numpy(rng.random((n, 3)))
    z = torch.from_numpy(np.sin(5 * rng.random(n)) + 0.1 * rng.standard_normal(n))
    post = Posterior(
        lengthscale=torch.from_numpy(np.exp(rng.normal(-1.0, 0.3, (draws, 3)))),
        noise=torch.from_numpy(np.exp(rng.normal(-4.0, 0.5, draws))),
        chains=1,
        mode_lengthscale=torch.tensor([0.4, 0.4, 0.4], dtype=D),
        mode_noise=0.02,
    )
    noise = torch.from_numpy(rng.uniform(0.001, 0.01, n)) if known else None
    return post, u, z, noise, torch.from_numpy(rng.random((50, 3)))


@pytest.mark.parametrize("known", [False, True])
@pytest.mark.parametrize("grouped", [False, True])
def test_conditioning_on_the_picks_gives_the_refitted_variances(monkeypatch, known, grouped):
    post, u, z, noise, points = _setting(known=known)
    if grouped:  # draws in groups of 2, the products in parts of 1 draw
        monkeypatch.setattr(acquisition, "FIT_ELEMENTS", 2 * 40 * 40)
        monkeypatch.setattr(gp, "PRODUCT_ELEMENTS", 40 * 50)
    output = (1.0, post, u, z, noise, None, None)
    base = DrawGPs(u, z, post.lengthscale, post.noise, noise)
    assert (base.whole is None) == grouped
    state = Fantasized.of(base, points)
    np.testing.assert_allclose(state.variances(), base.predict(points)[1], rtol=1e-10)
    picks = []
    for j in (7, 3, 31, 8):
        picks.append(j)
        state.add(j)
        refitted = _gps_with(output, points[picks]).predict(points)[1]
        np.testing.assert_allclose(state.variances(), refitted, rtol=1e-9, atol=1e-12)


def test_from_conditioned_from_labels_a_greedy_batch_picks_as_the_refits_do(monkeypatch):
    """With a point out and a failure model's weights: the same picks, scores to 1e-9."""
    post, u, z, _, candidates = _setting(n=40, draws=8, seed=3)
    weights = torch.from_numpy(np.random.default_rng(4).uniform(0.5, 1.0, len(candidates)))
    parts = [(1.0, post, u, z, None)]
    runs = {}
    for name, first in (("refits", 10_000), ("conditioned", 40)):
        monkeypatch.setattr(acquisition, "CONDITIONED_FROM", first)
        runs[name] = greedy_batch_outputs(
            "qb-mgp", parts, candidates, 6, candidates[:1] + 0.01, shortlist=30, weights=weights
        )
    (order, scores), (order_c, scores_c) = runs["refits"], runs["conditioned"]
    assert order.tolist() == order_c.tolist() and len(set(order.tolist())) == 6
    np.testing.assert_allclose(scores_c, scores, rtol=1e-9)


@pytest.mark.parametrize("known", [False, True])
def test_the_points_out_conditioned_in_one_block_as_if_refitted_with_them(known):
    """The shortlist's state with points out: the draws' means of the labels alone and the
    variances of their GPs refitted with the points out as fantasies, before and after picks."""
    post, u, z, noise, points = _setting(known=known)
    output = (1.0, post, u, z, noise, None, None)
    base = DrawGPs(u, z, post.lengthscale, post.noise, noise)
    out = points[:4] + 0.013
    state = Fantasized.of(base, points, out)
    np.testing.assert_allclose(state.mean, base.predict(points, False)[0], rtol=1e-12)
    np.testing.assert_allclose(state.variances(), _gps_with(output, out).predict(points)[1], 1e-9)
    state.add(11)
    refitted = _gps_with(output, torch.cat([out, points[11:12]])).predict(points)[1]
    np.testing.assert_allclose(state.variances(), refitted, rtol=1e-9, atol=1e-12)


def test_a_screens_left_out_candidates_are_never_picked(monkeypatch):
    """A first scoring that left candidates out (``-inf``) gives a shortlist of those kept: a
    batch longer than them picks them alone."""
    monkeypatch.setattr(acquisition, "CONDITIONED_FROM", 40)
    post, u, z, _, candidates = _setting(n=40, draws=8, seed=5)
    first = acquisition.batch_scores("qb-mgp", [(1.0, post, u, z, None)], candidates)
    first[torch.arange(len(candidates)) % 10 != 0] = -torch.inf  # 5 kept of 50
    order, scores = greedy_batch_outputs(
        "qb-mgp", [(1.0, post, u, z, None)], candidates, 8, scores=first
    )
    assert sorted(order.tolist()) == [0, 10, 20, 30, 40] and torch.isfinite(scores).all()


@pytest.mark.parametrize("known", [False, True])
@pytest.mark.parametrize("grouped", [False, True])
def test_from_conditioned_from_labels_a_first_scoring_conditions_on_the_points_out(
    monkeypatch, known, grouped
):
    """A greedy batch's first scoring with three points out: the scores of the draws' GPs
    refitted with them, to 1e-9, whether the draws are fitted at once or in groups."""
    post, u, z, noise, candidates = _setting(known=known)
    if grouped:
        monkeypatch.setattr(acquisition, "FIT_ELEMENTS", 2 * 40 * 40)
    out = candidates[:3] + 0.017
    runs = {}
    for name, first in (("refits", 10_000), ("conditioned", 40)):
        monkeypatch.setattr(acquisition, "CONDITIONED_FROM", first)
        runs[name] = acquisition.batch_scores(
            "bald", [(1.0, post, u, z, noise)], candidates, pending=out
        )
    np.testing.assert_allclose(runs["conditioned"], runs["refits"], rtol=1e-9)
    without = acquisition.batch_scores("bald", [(1.0, post, u, z, noise)], candidates)
    assert (runs["conditioned"] - without).abs().max() > 1e-3  # the points out count
