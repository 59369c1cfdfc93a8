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

A greedy batch (:func:`polished_batch`) polishes each pick in turn, the picks before it (and
the points out) fantasies of the acquisition, as :func:`worker.acquisition.greedy_batch_outputs`
picks among its shortlist.
"""

from __future__ import annotations

import math
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

    def value_and_grad(self, start: np.ndarray, w: np.ndarray) -> tuple[float, np.ndarray]:
        """The objective and its gradient in ``w``, at ``start`` with its free coordinates
        ``w``."""
        free = torch.from_numpy(self.region.free)
        w_t = torch.from_numpy(np.asarray(w, dtype=np.float64)).requires_grad_(True)
        v = torch.from_numpy(start).index_put((free,), w_t)
        a = self.acquisition(self.region.features(v[None]))[0]
        (grad,) = torch.autograd.grad(a, w_t)
        a, grad = float(a.detach()), grad.numpy()
        if self.failure is None:
            return a, grad
        v0 = v.detach().numpy()
        points = np.repeat(v0[None], 1 + 2 * len(w), 0)
        for i, j in enumerate(self.region.free):
            points[1 + 2 * i, j] = min(1.0, v0[j] + STEP)
            points[2 + 2 * i, j] = max(0.0, v0[j] - STEP)
        weights = self.weight(points)[1]
        up, down = weights[1::2], weights[2::2]
        width = (
            points[1::2, self.region.free].diagonal() - points[2::2, self.region.free].diagonal()
        )
        slope = (up - down) / width
        return a * weights[0], grad * weights[0] + a * slope


def polish(objective: Objective, starts: np.ndarray, avoid=None) -> tuple[np.ndarray, np.ndarray]:
    """Each start (pool coordinates, ``k x d``) climbed (the module's rules): the points kept
    (``k x d``, a start where no better point was found, or where the point reached lies at
    one of ``avoid``, GP features: the labeled points where repeats are not allowed) and their
    objectives."""
    region = objective.region
    starts = np.atleast_2d(np.asarray(starts, dtype=np.float64))
    values = objective.value(starts) if len(starts) else np.empty(0)
    points = starts.copy()
    if not len(region.free):
        return points, values
    bounds = [(0.0, 1.0)] * len(region.free)
    for k, start in enumerate(starts):

        def negative(w, start=start):
            value, grad = objective.value_and_grad(start, w)
            return -value, -grad

        constraints = region.inequalities(start)
        found = minimize(
            negative,
            start[region.free],
            jac=True,
            method="SLSQP" if constraints else "L-BFGS-B",
            bounds=bounds,
            constraints=constraints,
            options={"maxiter": MAX_ITER},
        )
        v = start.copy()
        v[region.free] = np.clip(found.x, 0.0, 1.0)
        v = _inside(region, start, v)
        keep, _ = objective.weight(v[None])
        value = objective.value(v[None])[0]
        if keep[0] and np.isfinite(value) and value > values[k] and not at(region, v, avoid):
            points[k], values[k] = v, value
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
