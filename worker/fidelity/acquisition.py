"""Choosing a multi-fidelity campaign's next point and level.

A run at ``(u, t)`` teaches about the top level: by the posterior's Gaussian conditioning, its
label ``y = f_t(u) + e_t`` lowers the top level's variance at each point ``r`` by

    Cov(f_top(r), f_t(u))^2 / (Var(f_t(u)) + s2_t)

(posterior covariances, given the runs so far). :func:`variance_reduction` averages that over
reference points (the top level's integrated variance, IVR) and over the posterior's draws;
divided by the level's cost it is what the run teaches per unit of cost. The paper's
disagreement acquisitions choose where (:func:`disagreement`, at the top level's draws) and
this chooses the level there (:func:`level_at`); :func:`choose` does either, and
:func:`scores` scores candidate runs of given levels as it would rank them. Runs out and a
batch's runs chosen already enter as fantasies (:func:`fantasized`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from fbgp_al.worker.acquisition import b_alm, b_qbc, qb_mgp
from fbgp_al.worker.fidelity.model import Conditioned

# The paper's disagreement acquisitions of the top level's predictions (noise included), by name
DISAGREEMENTS = {"b-alm": b_alm, "b-qbc": b_qbc, "qb-mgp": qb_mgp}


def variance_reduction(draws: list[Conditioned], candidates, reference, level: int, top: int):
    """Per candidate (``m x d``) run at ``level``: the top level's predictive variance removed,
    averaged over the ``reference`` points (``r x d``) and the ``draws``: ``m``."""
    candidates = torch.as_tensor(np.asarray(candidates, dtype=np.float64))
    reference = torch.as_tensor(np.asarray(reference, dtype=np.float64))
    t_c = torch.full((len(candidates),), int(level), dtype=torch.int64)
    t_r = torch.full((len(reference),), int(top), dtype=torch.int64)
    total = torch.zeros(len(candidates), dtype=torch.float64)
    for g in draws:
        A_c, A_r = g.whitened(candidates, t_c), g.whitened(reference, t_r)
        cross = g.prior(reference, t_r, candidates, t_c) - A_r.T @ A_c  # r x m
        var = torch.clamp(g.prior_variance(level) - (A_c * A_c).sum(0), min=0.0) + g.noise[level]
        total += (cross * cross).mean(0) / var
    return (total / len(draws)).numpy()


def per_cost(draws: list[Conditioned], candidates, reference, costs) -> np.ndarray:
    """:func:`variance_reduction` per unit cost at every level: ``levels x m``."""
    top = len(costs) - 1
    return np.stack(
        [
            variance_reduction(draws, candidates, reference, t, top) / float(cost)
            for t, cost in enumerate(costs)
        ]
    )


def best(draws: list[Conditioned], candidates, reference, costs) -> tuple[int, int]:
    """The candidate's row and the level of the largest variance reduction per cost."""
    gain = per_cost(draws, candidates, reference, costs)
    level, row = np.unravel_index(int(np.argmax(gain)), gain.shape)
    return int(row), int(level)


def level_at(draws: list[Conditioned], point, reference, costs) -> int:
    """The level to run ``point`` (``d``) at: the largest variance reduction per cost there."""
    gain = per_cost(draws, np.asarray(point, dtype=np.float64)[None], reference, costs)
    return int(np.argmax(gain[:, 0]))


def disagreement(draws: list[Conditioned], candidates, name: str) -> np.ndarray:
    """The acquisition ``name`` (:data:`DISAGREEMENTS`, as :mod:`worker.acquisition` computes
    it) of the top level's predictions (each draw's mean, and its latent variance plus its top
    level's noise) at the candidates: ``m``."""
    top = len(draws[0].noise) - 1
    means, variances = [], []
    for g in draws:
        mean, var = g.predict(candidates, top)
        means.append(mean)
        variances.append(var + g.noise[top])
    return DISAGREEMENTS[name](torch.stack(means), torch.stack(variances)).numpy()


def choose(draws: list[Conditioned], candidates, reference, costs, name: str) -> tuple[int, int]:
    """A run's candidate row and level: by ``ivr`` (:func:`best`, the variance removed per
    cost over both), or by a disagreement acquisition at the top level (:func:`disagreement`)
    with the level of the largest variance removed per cost there (:func:`level_at`)."""
    if name == "ivr":
        return best(draws, candidates, reference, costs)
    row = int(np.argmax(disagreement(draws, candidates, name)))
    return row, level_at(draws, np.asarray(candidates)[row], reference, costs)


def scores(draws: list[Conditioned], candidates, levels, reference, costs, name: str):
    """Each candidate run's score, the candidates being points (``m x d``) each at its own
    level (``levels``, ``m``), as :func:`choose` ranks them: by ``ivr``, the top level's
    variance removed per cost of a run there; by a disagreement, the top level's disagreement
    at the point where the candidate's level is the one of the largest variance removed per
    cost there, and ``-inf`` at the others (a point is run at that level only): ``m``."""
    candidates = np.asarray(candidates, dtype=np.float64)
    levels = np.asarray(levels, dtype=np.int64)
    out = np.full(len(candidates), -np.inf)
    if name == "ivr":
        top = len(costs) - 1
        for t, cost in enumerate(costs):
            rows = np.flatnonzero(levels == t)
            if len(rows):
                out[rows] = variance_reduction(draws, candidates[rows], reference, t, top) / cost
        return out
    best_level = np.argmax(per_cost(draws, candidates, reference, costs), axis=0)
    rows = np.flatnonzero(best_level == levels)
    if len(rows):
        out[rows] = disagreement(draws, candidates[rows], name)
    return out


def fantasized(draws: list[Conditioned], u, t) -> list[Conditioned]:
    """The draws conditioned also on runs at ``(u, t)`` whose labels are not known yet (runs
    out, or chosen in a batch), each fantasized at its draw's mean: the variances are what
    those runs will leave whatever their labels, the means unchanged."""
    u = torch.as_tensor(np.asarray(u, dtype=np.float64))
    t = torch.as_tensor(np.asarray(t, dtype=np.int64))
    out = []
    for g in draws:
        k = g.prior(g.u, g.t, u, t)
        z = k.T @ g.alpha
        out.append(replace(g, u=torch.cat([g.u, u]), t=torch.cat([g.t, t]), z=torch.cat([g.z, z])))
    return out
