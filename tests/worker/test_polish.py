"""Polishing candidates over the box: the points reached against a dense grid of the
acquisition, never worse than their starts, inside the constraints (linear ones by SLSQP, the
others by the pull back), int and choice inputs held, the failure model's weight and
``min_success`` kept, and a greedy batch of polished picks."""

import threading
import time

import numpy as np
import pytest
import torch
from scipy.optimize import check_grad

from fbgp_al.worker.differentiable import Acquisition
from fbgp_al.worker.feasibility.campaign import fit_campaign
from fbgp_al.worker.mcmc import Posterior
from fbgp_al.worker.polish import Objective, Region, distinct_best, polish, polished_batch
from fbgp_al.worker.vocabulary.constraints import Constraints
from fbgp_al.worker.vocabulary.space import Space

D = torch.float64
PLAIN = Space.of([{"name": "a", "lower": 0.0, "upper": 1.0}, {"name": "b", "lower": 0, "upper": 1}])


def _acquisition(name="qb-mgp", dim=2, n=12, seed=0, features=None):
    g = torch.Generator().manual_seed(seed)
    u = torch.rand(n, dim, generator=g, dtype=D) if features is None else features
    z = torch.sin(5 * u[:, 0]) + u[:, 1:].sum(1)
    z = (z - z.mean()) / z.std()
    draws = 16
    post = Posterior(
        lengthscale=torch.exp(torch.randn(draws, u.shape[1], generator=g, dtype=D) * 0.3 - 1.2),
        noise=torch.exp(torch.randn(draws, generator=g, dtype=D) - 5.0),
        chains=2,
        mode_lengthscale=torch.full((u.shape[1],), 0.3, dtype=D),
        mode_noise=0.01,
    )
    return Acquisition(name, [(1.0, post, u, z, None)])


def _grid(k=201):
    a, b = np.meshgrid(np.linspace(0, 1, k), np.linspace(0, 1, k), indexing="ij")
    return np.c_[a.ravel(), b.ravel()]


def _best_starts(objective, count=5, size=500, seed=1):
    pool = np.random.default_rng(seed).random((size, 2))
    inside = pool[objective.region.holds(pool)]
    values = objective.value(inside)
    return inside[np.argsort(-values)[:count]]


@pytest.mark.parametrize("name", ["qb-mgp", "b-alm", "bald", "b-qbc", "alm"])
def test_the_best_point_reached_is_the_grids_best_or_better(name):
    objective = Objective(_acquisition(name), Region(PLAIN))
    starts = _best_starts(objective)
    points, values = polish(objective, starts)
    assert (values >= objective.value(starts)).all()  # never worse than a start
    np.testing.assert_allclose(objective.value(points), values, rtol=1e-12)
    grid = objective.value(_grid())
    assert values.max() >= grid.max() * (1 - 1e-9)  # the box's best, on a 201^2 grid
    assert values.max() > objective.value(starts).max()  # and better than the pool's


def test_points_stay_inside_linear_constraints_by_slsqp():
    constraints = Constraints.of(["a + b <= 0.8"], PLAIN)
    free = Objective(_acquisition(), Region(PLAIN))
    cut = Objective(_acquisition(), Region(PLAIN, constraints))
    assert not cut.region.holds(polish(free, _best_starts(free))[0]).all()  # it matters here
    assert len(cut.region.inequalities(np.array([0.1, 0.1]))) == 1
    points, values = polish(cut, _best_starts(cut))
    assert cut.region.holds(points).all()
    grid = _grid()
    inside = grid[cut.region.holds(grid)]
    assert values.max() >= cut.value(inside).max() * (1 - 1e-6)


def test_points_outside_other_constraints_are_pulled_back_inside():
    constraints = Constraints.of(["a <= 0.3 or b <= 0.3"], PLAIN)
    cut = Objective(_acquisition(), Region(PLAIN, constraints))
    assert cut.region.inequalities(np.array([0.1, 0.1])) == []  # no smooth inequality
    starts = _best_starts(cut)
    points, values = polish(cut, starts)
    assert cut.region.holds(points).all()
    assert (values >= cut.value(starts)).all()


def test_a_log_inputs_constraint_is_kept_in_its_own_units():
    space = Space.of(
        [
            {"name": "a", "lower": 0, "upper": 1},
            {"name": "k", "type": "log", "lower": 1e-3, "upper": 10},
        ]
    )
    constraints = Constraints.of(["k <= 5 * a"], space)
    cut = Objective(_acquisition(), Region(space, constraints))
    points, _ = polish(cut, _best_starts(cut))
    assert cut.region.holds(points).all()
    values = np.array(space.from_pool(points))
    assert (values[:, 1] <= 5 * values[:, 0] * (1 + 1e-9)).all()


def test_int_and_choice_inputs_are_held_at_the_starts():
    space = Space.of(
        [
            {"name": "a", "lower": 0, "upper": 1},
            {"name": "n", "type": "int", "lower": 1, "upper": 4},
            {"name": "m", "type": "choice", "values": ["x", "y", "z"]},
        ]
    )
    rng = np.random.default_rng(0)
    v = space.snap(rng.random((15, 3)))
    acquisition = _acquisition(features=torch.from_numpy(space.features(v)))
    objective = Objective(acquisition, Region(space))
    starts = space.snap(rng.random((6, 3)))
    points, values = polish(objective, starts)
    np.testing.assert_array_equal(points[:, 1:], starts[:, 1:])
    assert (points[:, 0] != starts[:, 0]).any() and (values >= objective.value(starts)).all()


@pytest.fixture(scope="module")
def failure():
    """A failure model of 12 runs done and 6 failed in the corner a > 0.7, b > 0.6, and the
    runs done."""
    spec = {"inputs": PLAIN.inputs and [i.spec() for i in PLAIN.inputs], "seed": 0}
    spec["failures"] = {"model": "classifier", "min_success": 0.5}
    rng = np.random.default_rng(1)
    ok = rng.random((40, 2))
    ok = ok[~((ok[:, 0] > 0.7) & (ok[:, 1] > 0.6))][:12]
    bad = 0.7 + 0.3 * rng.random((6, 2))
    labels = [{"x": p.tolist(), "y": 0.0} for p in ok]
    runs = fit_campaign(spec, labels, [{"x": p.tolist(), "reason": "x"} for p in bad], 0)
    return runs, torch.from_numpy(ok)


def test_the_failure_models_weight_is_climbed_and_min_success_kept(failure):
    failure, done = failure  # the GP's labels where runs succeeded: the failed corner unexplored
    objective = Objective(_acquisition(features=done), Region(PLAIN), failure)
    starts = np.full((3, 2), 0.5)
    w = np.array([[0.3, 0.4], [0.65, 0.55], [0.9, 0.2]])
    values, grads = objective.values_and_grads(starts, w)  # the three rows in one evaluation
    for row in range(3):

        def one(v, row=row):
            return objective.values_and_grads(starts[row : row + 1], v[None])

        alone = one(w[row])
        np.testing.assert_allclose(alone[0][0], values[row], rtol=1e-12)
        # the weight's slope is a central difference of step 1e-6: a rounding of 1e-16 in a
        # weight (BLAS may round a batch of other shape differently) moves it by about 1e-10
        np.testing.assert_allclose(alone[1][0], grads[row], rtol=1e-7, atol=1e-12)
        error = check_grad(lambda v: one(v)[0][0], lambda v: one(v)[1][0], w[row], epsilon=1e-6)
        assert error < 1e-4 * max(1.0, np.linalg.norm(grads[row]))
    points, values = polish(objective, _best_starts(objective))
    keep, weight = failure.weigh(points)
    assert keep.all()
    acquisition = Objective(_acquisition(features=done), Region(PLAIN))
    np.testing.assert_allclose(values, acquisition.value(points) * weight, rtol=1e-12)
    # the unweighted acquisition's best lies in the failed corner; the weighted one's does not
    best = polish(acquisition, _best_starts(acquisition))[0]
    assert not failure.weigh(best[:1])[0][0]


def test_a_polished_batch_spreads_its_picks():
    objective = Objective(_acquisition(), Region(PLAIN))
    candidates = np.random.default_rng(2).random((400, 2))
    scores = objective.value(candidates)
    picks, values = polished_batch(objective, candidates, scores, 3, 4)
    assert picks.shape == (3, 2) and len(values) == 3
    first, first_value = polish(objective, candidates[np.argsort(-scores)[:4]])
    np.testing.assert_allclose(picks[0], first[np.argmax(first_value)])
    assert min(np.abs(picks[i] - picks[j]).max() for i, j in [(0, 1), (0, 2), (1, 2)]) > 0.02
    # each later pick scored with the earlier ones as fantasies: below its score alone
    assert (values[1:] < objective.value(picks[1:])).all()


def test_distinct_best_keeps_each_point_once_best_first():
    points = np.array([[0.1, 0.1], [0.5, 0.5], [0.1, 0.1 + 1e-12]])
    kept, values = distinct_best(points, np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(kept, points[[2, 1]])
    np.testing.assert_array_equal(values, [3.0, 2.0])


def test_a_point_reached_at_one_to_avoid_is_not_kept():
    objective = Objective(_acquisition(), Region(PLAIN))
    starts = _best_starts(objective, count=2)
    points, values = polish(objective, starts)
    again, again_values = polish(objective, starts, avoid=points[:1])
    np.testing.assert_array_equal(again[0], starts[0])  # its start instead
    assert all(np.abs(p - points[0]).max() > 1e-9 for p in again)
    assert again_values[0] < values[0] and (again_values >= objective.value(starts)).all()


class _Counted(Objective):
    """An objective that counts its evaluations and the rows they hold."""

    calls: int = 0
    rows: int = 0

    def values_and_grads(self, starts, w):
        self.calls, self.rows = self.calls + 1, self.rows + len(starts)
        return super().values_and_grads(starts, w)


def test_starts_climb_side_by_side_as_each_would_alone():
    together = _Counted(_acquisition("qb-mgp", n=30), Region(PLAIN))
    starts = _best_starts(together, count=4)
    points, values = polish(together, starts)
    alone = []
    for start in starts:
        one = _Counted(_acquisition("qb-mgp", n=30), Region(PLAIN))
        alone.append((*polish(one, start[None]), one.calls))
    assert sorted(a[2] for a in alone) == [2, 2, 7, 8]  # two climbs to a corner, two longer
    np.testing.assert_allclose(points, np.concatenate([a[0] for a in alone]), atol=1e-7)
    np.testing.assert_allclose(values, np.concatenate([a[1] for a in alone]), rtol=1e-10)
    # a round per step of the longest climb, each start's evaluations all made
    assert together.calls == max(a[2] for a in alone)
    assert together.rows == sum(a[2] for a in alone)


def test_an_evaluation_that_fails_fails_the_polish():
    class Failing(Objective):
        def values_and_grads(self, starts, w):
            raise FloatingPointError("no value")

    objective = Failing(_acquisition(), Region(PLAIN))
    with pytest.raises(FloatingPointError, match="no value"):
        polish(objective, _best_starts(objective, count=3))


def test_a_stop_between_rounds_ends_every_climb(monkeypatch):
    """What stops the rounds (a job's timeout, an interrupt) reaches the caller, and the
    threads of the climbs waiting for their next round end with it."""
    from fbgp_al.worker import polish as polish_module

    class Stop(BaseException):
        pass

    rounds = []
    original = polish_module._Lockstep._round

    def stopping(self):
        rounds.append(len(self.asked))
        if len(rounds) == 3:
            raise Stop
        original(self)

    monkeypatch.setattr(polish_module._Lockstep, "_round", stopping)
    before = threading.active_count()
    objective = Objective(_acquisition("bald"), Region(PLAIN))  # climbs of 6 and 7 steps
    with pytest.raises(Stop):
        polish(objective, _best_starts(objective, count=4))
    assert rounds == [4, 4, 4]  # every climb had asked for its third point
    deadline = time.monotonic() + 10
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threading.active_count() == before
