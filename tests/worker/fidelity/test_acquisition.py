"""The top level's variance removed by a run (:mod:`worker.fidelity.acquisition`) against the
same run added to the runs and the top level's variance computed again."""

import numpy as np
import pytest
import torch

from fbgp_al.worker.fidelity import acquisition
from fbgp_al.worker.fidelity.model import Conditioned

D = torch.float64


def _draws(seed: int, levels: int = 3, count: int = 3):
    rng = np.random.default_rng(seed)
    u = rng.random((4 * levels, 2))
    t = np.repeat(np.arange(levels), 4)
    z = rng.standard_normal(len(u))
    draws = []
    for _ in range(count):
        draws.append(
            Conditioned(
                torch.as_tensor(u),
                torch.as_tensor(t),
                torch.as_tensor(z),
                torch.as_tensor(rng.uniform(0.2, 0.8, (levels, 2))),
                torch.as_tensor(np.r_[1.0, rng.uniform(0.1, 0.5, levels - 1)]),
                torch.as_tensor(rng.uniform(0.5, 1.5, levels - 1)),
                torch.as_tensor(rng.uniform(1e-3, 1e-2, levels)),
            )
        )
    return draws, rng


def _with_run(g: Conditioned, point, level):
    return Conditioned(
        torch.cat([g.u, torch.as_tensor(point, dtype=D)[None]]),
        torch.cat([g.t, torch.tensor([level])]),
        torch.cat([g.z, torch.zeros(1, dtype=D)]),
        g.lengthscales,
        g.variances,
        g.rho,
        g.noise,
    )


@pytest.mark.parametrize("level", [0, 1, 2])
def test_the_variance_removed_is_that_of_the_run_added(level):
    draws, rng = _draws(level)
    candidates, reference = rng.random((5, 2)), rng.random((40, 2))
    got = acquisition.variance_reduction(draws, candidates, reference, level, top=2)
    expected = np.zeros(len(candidates))
    for g in draws:
        before = g.predict(reference, 2)[1].numpy()
        for i, c in enumerate(candidates):
            after = _with_run(g, c, level).predict(reference, 2)[1].numpy()
            expected[i] += (before - after).mean() / len(draws)
    np.testing.assert_allclose(got, expected, rtol=1e-8, atol=1e-12)
    assert (got > 0).all()


def test_the_choice_weighs_the_gain_by_the_cost():
    draws, rng = _draws(5)
    candidates, reference = rng.random((6, 2)), rng.random((30, 2))
    costs = [1.0, 4.0, 20.0]
    gain = acquisition.per_cost(draws, candidates, reference, costs)
    for t, cost in enumerate(costs):
        raw = acquisition.variance_reduction(draws, candidates, reference, t, top=2)
        np.testing.assert_allclose(gain[t], raw / cost, rtol=1e-12)
    row, level = acquisition.best(draws, candidates, reference, costs)
    assert gain[level, row] == gain.max()
    assert acquisition.level_at(draws, candidates[row], reference, costs) == level
    # the top level free: a run there teaches the most about it, per unit of cost
    assert acquisition.best(draws, candidates, reference, [1.0, 1.0, 1e-9])[1] == 2


@pytest.mark.parametrize("name", ["b-qbc", "qb-mgp", "b-alm"])
def test_a_disagreement_at_the_top_level_with_its_level_by_cost(name):
    draws, rng = _draws(6)
    candidates, reference = rng.random((8, 2)), rng.random((30, 2))
    means = np.array([g.predict(candidates, 2)[0].numpy() for g in draws])
    variances = np.array([g.predict(candidates, 2)[1].numpy() + float(g.noise[2]) for g in draws])
    expected = {
        "b-qbc": means.var(0),
        "b-alm": variances.mean(0),
        "qb-mgp": variances.mean(0) + means.var(0),
    }[name]
    np.testing.assert_allclose(
        acquisition.disagreement(draws, candidates, name), expected, rtol=1e-12
    )
    costs = [1.0, 3.0, 9.0]
    row, level = acquisition.choose(draws, candidates, reference, costs, name)
    assert row == int(np.argmax(expected))
    assert level == int(
        np.argmax(acquisition.per_cost(draws, candidates[row : row + 1], reference, costs)[:, 0])
    )
    assert acquisition.choose(draws, candidates, reference, costs, "ivr") == acquisition.best(
        draws, candidates, reference, costs
    )


def test_no_candidates_no_scores():
    draws, rng = _draws(7)
    empty = np.zeros((0, 2))
    assert acquisition.variance_reduction(draws, empty, rng.random((5, 2)), 0, top=2).shape == (0,)
    mean, var = draws[0].predict(empty, 2)
    assert mean.shape == var.shape == (0,)


@pytest.mark.parametrize("name", ["ivr", "qb-mgp", "b-qbc"])
def test_scores_of_every_point_at_every_level_rank_as_choose(name):
    draws, rng = _draws(7, levels=2)
    points, reference, costs = rng.random((9, 2)), rng.random((30, 2)), [1.0, 4.0]
    u = np.repeat(points, 2, axis=0)
    t = np.tile([0, 1], len(points))
    got = acquisition.scores(draws, u, t, reference, costs, name)
    row, level = acquisition.choose(draws, points, reference, costs, name)
    best = int(np.argmax(got))
    assert (best // 2, best % 2) == (row, level)
    if name == "ivr":  # each run's own variance removed per its level's cost
        for k in (0, 1):
            expected = acquisition.variance_reduction(draws, points, reference, k, 1) / costs[k]
            np.testing.assert_allclose(got[t == k], expected, rtol=1e-12)
    else:  # a point scores at the level ivr chooses there, -inf at the other
        assert (np.isfinite(got).reshape(-1, 2).sum(1) == 1).all()


def test_a_fantasy_run_removes_the_variance_a_label_there_would_and_keeps_the_mean():
    draws, rng = _draws(3, levels=2, count=2)
    point, reference = rng.random((1, 2)), rng.random((20, 2))
    after = acquisition.fantasized(draws, point, [1])
    for g, h in zip(draws, after, strict=True):
        added = _with_run(g, point[0], 1)
        np.testing.assert_allclose(
            h.predict(reference, 1)[1].numpy(), added.predict(reference, 1)[1].numpy(), rtol=1e-9
        )
        np.testing.assert_allclose(
            h.predict(reference, 1)[0].numpy(), g.predict(reference, 1)[0].numpy(), atol=1e-9
        )
    removed = acquisition.variance_reduction(draws, point, reference, 1, 1)
    left = acquisition.variance_reduction(after, point, reference, 1, 1)
    assert left[0] < 0.5 * removed[0]  # the same run again teaches far less
