"""Polishing a refit's best candidates: from each of the ``starts`` best (by the pool's
scoring, weighed by the failure model), scipy climbs the acquisition over the box
(:class:`worker.differentiable.Acquisition`, averaged over the draws as the pool's scoring
averages them, its gradient by autograd) in the float and log inputs, the int and choice inputs
held at the start's values; the point reached is a candidate too.

- Without constraints, or with constraints none of which is smooth, L-BFGS-B in the unit box;
  where some constraints are linear inequalities (``<=``, ``<``, joined by ``and``), SLSQP with
  them as inequalities (a log input's value is smooth in its coordinate). Constraints that are
  not (``or``, ``not``, ``==``, ``!=``, a choice's ``in``) are no smooth inequality: a point
  reached outside them is pulled back along the segment to its start (which holds them) by
  bisection, to the last point found inside. Every point kept holds every constraint, as
  :meth:`worker.vocabulary.constraints.Constraints.holds_at` decides.
- With a failure model the objective is the acquisition times the candidate's weight (its
  pessimistic chance of success, :meth:`worker.feasibility.campaign.FailureModel.weigh`), the
  weight's gradient by central differences; a point whose probability of success is below
  ``min_success`` is not kept.
- A point reached replaces its start only where its objective is higher: a polished candidate
  is never worse than the pool's.
- Each start has its optimizer, and they run side by side (:func:`climb`): every round
  evaluates the starts still climbing together, one pass over the draws' factors for all.

A greedy batch (:func:`polished_batch`) polishes each pick in turn, the picks before it (and
the points out) fantasies of the acquisition, as :func:`worker.acquisition.greedy_batch_outputs`
picks among its shortlist.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch
from scipy.optimize import minimize

from fbgp_al.worker.acquisition import SHORTLIST
from fbgp_al.worker.differentiable import Acquisition
from fbgp_al.worker.feasibility.campaign import FailureModel
from fbgp_al.worker.transforms import DTYPE
from fbgp_al.worker.vocabulary.constraint_syntax import All, Linear
from fbgp_al.worker.vocabulary.constraints import Constraints
from fbgp_al.worker.vocabulary.space import Space

MAX_ITER = 200  # iterations of L-BFGS-B or SLSQP per start
STEP = 1e-6  # the central differences' step of the failure model's weight, in pool coordinates
BISECTIONS = 30  # halvings of the segment back to the start of a point outside the constraints
SAME = 1e-9  # points nearer than this (in pool coordinates) are the same point


@dataclass(frozen=True, eq=False)
class Region:
    """Where a polish moves a start: the pool coordinates of ``space``'s float and log inputs
    (:attr:`free`), the others held, inside ``constraints`` (None: the box)."""

    space: Space
    constraints: Constraints | None = None

    @cached_property
    def free(self) -> np.ndarray:
        """The inputs a polish moves: the float and log ones."""
        return np.array([j for j, i in enumerate(self.space.inputs) if i.type in ("float", "log")])

    def features(self, v: torch.Tensor) -> torch.Tensor:
        """The GP's features of pool coordinates ``v`` (``c x d``), differentiable in the
        float, log and int coordinates (a choice's one-hot block held)."""
        if self.space.numeric:
            return v
        blocks = []
        for j, spec in enumerate(self.space.inputs):
            if spec.type == "choice":
                held = spec.features(v[:, j].detach().numpy())
                blocks.append(torch.from_numpy(held))
            else:
                blocks.append(v[:, j : j + 1])
        return torch.cat(blocks, 1)

    def holds(self, v: np.ndarray) -> np.ndarray:
        """Whether every constraint holds at pool coordinates ``v`` (``m x d``)."""
        v = np.atleast_2d(v)
        return np.ones(len(v), bool) if self.constraints is None else self.constraints.holds_at(v)

    def inequalities(self, start: np.ndarray) -> list[dict]:
        """The constraints that are linear inequalities, as SLSQP's ``ineq`` (``g(w) >= 0``)
        in the free coordinates ``w``, the others held at ``start``'s."""
        if self.constraints is None:
            return []
        out = []
        for tree in self.constraints.trees:
            nodes = tree.nodes if isinstance(tree, All) else (tree,)
            for node in nodes:
                smooth = isinstance(node, Linear) and node.op in ("<=", "<")
                if smooth and set(node.columns) & set(self.free.tolist()):
                    out.append(self._inequality(node, start))
        return out

    def _inequality(self, node: Linear, start: np.ndarray) -> dict:
        free = self.free

        def codes(w):
            v = start.copy()
            v[free] = w
            out, slope = np.zeros(len(node.columns)), np.zeros((len(node.columns), len(free)))
            for k, j in enumerate(node.columns):
                spec = self.space.inputs[j]
                where = np.flatnonzero(free == j)
                if spec.type == "log":
                    lo, hi = math.log(spec.lower), math.log(spec.upper)
                    out[k] = math.exp(lo + v[j] * (hi - lo))
                    slope[k, where] = out[k] * (hi - lo)
                elif spec.type == "float":
                    out[k] = spec.lower + v[j] * (spec.upper - spec.lower)
                    slope[k, where] = spec.upper - spec.lower
                else:  # held: its code at the start
                    out[k] = spec.from_pool(np.array([v[j]]))[0]
            return out, slope

        coefs = np.asarray(node.coefs)
        return {
            "type": "ineq",
            "fun": lambda w: -(coefs @ codes(w)[0] + node.const),
            "jac": lambda w: -(coefs @ codes(w)[1]),
        }


@dataclass
class Objective:
    """What a polish climbs: ``acquisition`` times the failure model's weight (if any) at the
    pool coordinates of one start with its free coordinates ``w``."""

    acquisition: Acquisition
    region: Region
    failure: FailureModel | None = None

    def weight(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The failure model's mask (at least ``min_success``) and weight at ``v`` (``m x d``);
        ones without a failure model."""
        if self.failure is None:
            return np.ones(len(v), bool), np.ones(len(v))
        features = self.region.features(torch.from_numpy(v)).numpy()
        return self.failure.weigh(features)

    def value(self, v: np.ndarray) -> np.ndarray:
        """The objective at pool coordinates ``v`` (``m x d``), no gradient."""
        with torch.no_grad():
            a = self.acquisition(self.region.features(torch.from_numpy(v))).numpy()
        return a * self.weight(v)[1]

    def values_and_grads(self, starts: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The objective at each of ``starts`` (pool coordinates, ``k x d``) with its free
        coordinates the row of ``w`` (``k x f``), and each one's gradient in its row (``k x
        f``): one evaluation for all of them (the rows do not interact)."""
        free = torch.from_numpy(self.region.free)
        w_t = torch.from_numpy(np.asarray(w, dtype=np.float64)).requires_grad_(True)
        v = torch.from_numpy(np.asarray(starts, dtype=np.float64)).index_copy(1, free, w_t)
        a = self.acquisition(self.region.features(v))
        (grad,) = torch.autograd.grad(a.sum(), w_t)
        a, grad = a.detach().numpy(), grad.numpy()
        if self.failure is None:
            return a, grad
        v0 = v.detach().numpy()
        k, f = w_t.shape
        upper = np.minimum(1.0, v0[:, self.region.free] + STEP)  # k x f, the steps kept in
        lower = np.maximum(0.0, v0[:, self.region.free] - STEP)  # the box
        points = np.repeat(v0[:, None], 1 + 2 * f, 1)  # k x (1 + 2f) x d
        for i, j in enumerate(self.region.free):
            points[:, 1 + 2 * i, j], points[:, 2 + 2 * i, j] = upper[:, i], lower[:, i]
        weights = self.weight(points.reshape(-1, v0.shape[1]))[1].reshape(k, 1 + 2 * f)
        slope = (weights[:, 1::2] - weights[:, 2::2]) / (upper - lower)
        return a * weights[:, 0], grad * weights[:, :1] + a[:, None] * slope


def climb(objective: Objective, starts: np.ndarray) -> np.ndarray:
    """Each of ``starts`` (``k x d``) climbed by its own optimizer (L-BFGS-B in the unit box, or
    SLSQP with its linear inequalities), the optimizers run side by side
    (:class:`_Lockstep`) so that each round evaluates every start still climbing in one pass
    over the draws' factors. Returns the points reached (``k x d``, in the box)."""
    region = objective.region
    free = region.free

    def one(start: np.ndarray, negative) -> np.ndarray:
        constraints = region.inequalities(start)
        found = minimize(
            negative,
            start[free],
            jac=True,
            method="SLSQP" if constraints else "L-BFGS-B",
            bounds=[(0.0, 1.0)] * len(free),
            constraints=constraints,
            options={"maxiter": MAX_ITER},
        )
        reached = start.copy()
        reached[free] = np.clip(found.x, 0.0, 1.0)
        return reached

    return np.array(_Lockstep(objective, starts).run(one))


class _Lockstep:
    """Optimizers of several starts, one thread each, whose objective evaluations are gathered:
    a round waits until every optimizer still running has asked for its next point, evaluates
    them all at once (:meth:`Objective.values_and_grads`) and answers each. An optimizer's path
    is the one it takes on its own (its values and gradients do not depend on the other rows,
    to rounding), and the rounds are as many as the longest path's evaluations rather than
    the sum of them all (docs/benchmarks.md, issue 55)."""

    def __init__(self, objective: Objective, starts: np.ndarray):
        self.objective, self.starts = objective, starts
        self.ready = threading.Condition()
        self.asked: dict[int, np.ndarray] = {}
        self.answers: dict[int, tuple | BaseException] = {}
        self.running = set(range(len(starts)))
        self.stopped: BaseException | None = None  # what stopped the rounds, if anything

    def negative(self, i: int, w: np.ndarray) -> tuple[float, np.ndarray]:
        """Start ``i``'s negated objective and gradient at ``w``, from the next round."""
        with self.ready:
            self.asked[i] = np.array(w, dtype=np.float64)
            self.ready.notify_all()
            self.ready.wait_for(lambda: i in self.answers or self.stopped is not None)
            answer = self.answers.pop(i, self.stopped)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def run(self, one) -> list[np.ndarray]:
        """``one(start, negative)`` for each start in a thread of its own, the rounds here;
        the results in the starts' order."""
        results: list = [None] * len(self.starts)

        def thread(i: int) -> None:
            try:
                results[i] = one(self.starts[i], lambda w: self.negative(i, w))
            except BaseException as error:  # handed back to the caller
                results[i] = error
            finally:
                with self.ready:
                    self.running.discard(i)
                    self.ready.notify_all()

        threads = [
            threading.Thread(target=thread, args=(i,), daemon=True) for i in range(len(self.starts))
        ]
        for t in threads:
            t.start()
        try:
            with self.ready:
                while True:
                    self.ready.wait_for(
                        lambda: not self.answers and set(self.asked) == self.running
                    )
                    if not self.running:
                        break
                    self._round()
        except BaseException as error:  # a job's timeout, an interrupt: the threads end too
            with self.ready:
                self.stopped = error
                self.ready.notify_all()
            raise
        for t in threads:
            t.join()
        for r in results:
            if isinstance(r, BaseException):
                raise r
        return results

    def _round(self) -> None:
        rows = sorted(self.asked)
        try:
            values, grads = self.objective.values_and_grads(
                self.starts[rows], np.array([self.asked[i] for i in rows])
            )
            for j, i in enumerate(rows):
                self.answers[i] = (-float(values[j]), -grads[j])
        except BaseException as error:
            for i in rows:
                self.answers[i] = error
        self.asked.clear()
        self.ready.notify_all()


def polish(objective: Objective, starts: np.ndarray, avoid=None) -> tuple[np.ndarray, np.ndarray]:
    """Each start (pool coordinates, ``k x d``) climbed (the module's rules, :func:`climb`):
    the points kept (``k x d``, a start where no better point was found, or where the point
    reached lies at one of ``avoid``, GP features: the labeled points where repeats are not
    allowed) and their objectives."""
    region = objective.region
    starts = np.atleast_2d(np.asarray(starts, dtype=np.float64))
    values = objective.value(starts) if len(starts) else np.empty(0)
    points = starts.copy()
    if not len(region.free) or not len(starts):
        return points, values
    reached = climb(objective, starts)
    reached = np.array([_inside(region, s, v) for s, v in zip(starts, reached, strict=True)])
    keep, _ = objective.weight(reached)
    value = objective.value(reached)
    for k, v in enumerate(reached):
        if keep[k] and np.isfinite(value[k]) and value[k] > values[k] and not at(region, v, avoid):
            points[k], values[k] = v, value[k]
    return points, values


def at(region: Region, v: np.ndarray, points_u) -> bool:
    """Whether ``v`` (pool coordinates) lies at one of ``points_u`` (GP features, or None),
    nearer than ``SAME``."""
    if points_u is None or not len(points_u):
        return False
    features = region.features(torch.from_numpy(v[None])).numpy()
    return bool((np.abs(np.asarray(points_u) - features).max(1) < SAME).any())


def _inside(region: Region, start: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``v`` if it holds the constraints, else the last point found inside on the segment from
    ``start`` (inside) to it, by bisection."""
    if region.holds(v)[0]:
        return v
    lo, hi = 0.0, 1.0
    for _ in range(BISECTIONS):
        mid = 0.5 * (lo + hi)
        if region.holds(start + mid * (v - start))[0]:
            lo = mid
        else:
            hi = mid
    return start + lo * (v - start)


def distinct_best(points: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The points by descending value (ties in order), each kept once (nearer than ``SAME`` to
    a better one: the same)."""
    order = np.argsort(-values, kind="stable")
    kept: list[int] = []
    for i in order:
        if all(np.abs(points[i] - points[j]).max() >= SAME for j in kept):
            kept.append(int(i))
    return points[kept], values[kept]


def polished_batch(
    objective: Objective,
    candidates: np.ndarray,
    scores: np.ndarray,
    size: int,
    starts: int,
    shortlist: int = SHORTLIST,
    avoid=None,
) -> tuple[np.ndarray, np.ndarray]:
    """A greedy batch of ``size`` polished picks: ``candidates`` (pool coordinates, ``m x
    d``) with their first ``scores`` (weighed); each pick climbs from the ``starts`` best of
    the shortlist (the ``shortlist`` best by the first scores) under the acquisition with the
    picks before it as fantasies, and the best point reached (none at ``avoid``,
    :func:`polish`) is the pick. Returns the picks
    (``size x d``, fewer where the shortlist runs out) and their objectives when picked."""
    order = np.argsort(-np.asarray(scores), kind="stable")[:shortlist]
    order = order[np.isfinite(np.asarray(scores)[order])]
    short = candidates[order]
    current = np.asarray(scores)[order]
    available = np.ones(len(short), bool)
    picks, picked = [], []
    for _ in range(min(size, len(short))):
        if picks:  # the shortlist scored again with the picks as fantasies
            current = objective.value(short)
        top = np.argsort(-np.where(available, current, -np.inf), kind="stable")[:starts]
        top = top[available[top]]
        points, values = polish(objective, short[top], avoid)
        best = int(np.argmax(values))
        picks.append(points[best])
        picked.append(values[best])
        if np.abs(points[best] - short[top[best]]).max() < SAME:
            available[top[best]] = False  # a start kept as it was is picked
        acquisition = objective.acquisition.with_pending(
            objective.region.features(torch.from_numpy(points[best][None])).to(DTYPE)
        )
        objective = Objective(acquisition, objective.region, objective.failure)
    return np.array(picks).reshape(-1, candidates.shape[1]), np.array(picked)
