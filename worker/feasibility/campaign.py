"""A campaign's failure model: its runs as the classifier sees them, the bound on what
fitting it costs, and what a refit's ranking does with it.

The runs are the labels (successes) and the failed runs kept (failures; abandoned runs are no
outcome, and failures the owner told the service to forget, ``POST .../retry`` with
``forget_failures``, are left out), each at the features the regression GP sees
(:meth:`worker.vocabulary.space.Space.to_gp`). Fitting costs ``O(n^3)`` per EP sweep and per
evidence evaluation (EP's site updates are a Python loop), so beyond ``MAX_RUNS`` runs the
classifier is fitted on a seeded subset (:func:`bounded`): every failure (a seeded half of
``MAX_RUNS`` where there are more), and successes in two halves, those nearest a kept failure (where
the boundary is) and a uniform draw of the others (so that the classifier still knows where runs
succeed).

A refit then leaves out the candidates whose probability of success is below the campaign's
``min_success`` and weighs each other candidate's acquisition score by a pessimistic chance of
success: the campaign's ``weight_quantile`` (default ``WEIGHT_QUANTILE``) quantile of
``Phi(f)`` under the latent's posterior (:func:`success_quantile`, :meth:`FailureModel.weigh`).
Every acquisition's score is non-negative (a variance, a mutual information, a uniform draw),
so the product is the score times a chance of success that the run has, under the model's
posterior, with probability ``1 - weight_quantile`` at least. Among successes the weight is
near 1, at a failure near 0; near a failure, where the latent's posterior straddles 0 and
P(success) may still be one half, it is near 0: the model's doubt there weighs a point down,
not its mean alone. The acquisitions favour unexplored faces and corners, often 10 to 100 times
the score elsewhere, which a weight of one half does not offset: weighed by P(success) alone,
campaigns lost about as many runs after their design as random sampling would
(docs/benchmarks.md, "A crash region from a few crashes").

One place is spared that doubt: between a failed run and a successful one at most the
campaign's ``bracket`` apart (:func:`bracketed`), the region's border is known to lie within
that distance, and a candidate there is weighed by its median chance of success, ``Phi(m)``.
The first feasible points beside a region, where these regions' steep ground often is, would
otherwise never be labeled; a run there either labels one or halves the bracket
(docs/benchmarks.md, "Common noise, the labels' own error, and a border bracketed by a
failure and a success").
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy import special
from scipy.spatial.distance import cdist

from fbgp_al.worker.feasibility.classifier import Classifier, Constant, fit, from_dict
from fbgp_al.worker.feasibility.likelihoods import predictive_probability
from fbgp_al.worker.vocabulary.defaults import BRACKET, WEIGHT_QUANTILE, failure_options
from fbgp_al.worker.vocabulary.space import Space

# The most runs the classifier is fitted on (measured: docs/benchmarks.md, "Failure model in the
# refit": on the 2-core VM, in 3-D, a fit took 0.18 s at 100 runs, 0.68 s at 200, 1.86 s at 300)
MAX_RUNS = 200


def outcomes(space: Space, labels: list[dict], failures: list[dict]):
    """The runs' features (``n x d``, labels first, then failures) and outcomes (1: success)."""
    x = [label["x"] for label in labels] + [run["x"] for run in failures]
    u = np.asarray(space.to_gp(x), dtype=np.float64).reshape(len(x), -1)
    success = np.r_[np.ones(len(labels)), np.zeros(len(failures))]
    return u, success


def bounded(u: np.ndarray, success: np.ndarray, seed: int, limit: int = MAX_RUNS) -> np.ndarray:
    """The rows the classifier is fitted on, sorted: all when there are at most ``limit``; else
    the failures (a seeded ``limit // 2`` of them where there are more) and, to fill ``limit``,
    the successes nearest a kept failure (Euclidean, in the GP's features) for half of what is
    left and a seeded uniform draw of the other successes for the rest."""
    n = len(success)
    if n <= limit:
        return np.arange(n)
    rng = np.random.default_rng([seed, n])
    failed, ok = np.flatnonzero(success == 0), np.flatnonzero(success == 1)
    if len(failed) > limit // 2:
        failed = np.sort(rng.choice(failed, limit // 2, replace=False))
    room = limit - len(failed)
    if len(ok) <= room:
        return np.sort(np.r_[failed, ok])
    near = room // 2
    distance = np.full(len(ok), np.inf)
    for i in failed:  # one row at a time: memory stays O(n)
        distance = np.minimum(distance, ((u[ok] - u[i]) ** 2).sum(1))
    nearest = ok[np.argsort(distance, kind="stable")[:near]]
    others = np.setdiff1d(ok, nearest)
    drawn = rng.choice(others, room - near, replace=False)
    return np.sort(np.r_[failed, nearest, drawn])


def success_quantile(mean, var, likelihood: str = "probit", q: float = WEIGHT_QUANTILE):
    """The ``q`` quantile of the chance of success ``sigmoid(f)`` under the latent's posterior
    ``f ~ N(mean, var)``: ``sigmoid(mean + z_q sqrt(var))``, as the sigmoid is increasing."""
    f = np.asarray(mean, dtype=np.float64) + special.ndtri(q) * np.sqrt(np.maximum(var, 0.0))
    return special.ndtr(f) if likelihood == "probit" else special.expit(f)


BRACKET_CHUNK = 256  # candidates compared with every bracketing pair at once


def bracketed(runs: np.ndarray, success: np.ndarray, u: np.ndarray, bracket: float) -> np.ndarray:
    """Whether each candidate at ``u`` (``m x d``) lies between a failed run and a successful one
    (rows of ``runs``, ``success`` 0 or 1) at most ``bracket`` apart: nearer to each of the two
    than they are to each other (Euclidean, in the GP's features). None is with ``bracket`` 0.
    Only candidates within ``bracket`` of a failure can be, so only those are compared with the
    pairs, a chunk of rows at a time: memory stays ``O(m + pairs x CHUNK)``."""
    inside = np.zeros(len(u), dtype=bool)
    failed, ok = runs[success == 0], runs[success == 1]
    if bracket <= 0 or not len(failed) or not len(ok) or not len(u):
        return inside
    apart = cdist(failed, ok)
    f, s = np.nonzero(apart <= bracket)
    if not len(f):
        return inside
    width = apart[f, s]
    to_failed = cdist(u, failed[np.unique(f)])
    near = np.flatnonzero(to_failed.min(1) < bracket)
    for start in range(0, len(near), BRACKET_CHUNK):
        rows = near[start : start + BRACKET_CHUNK]
        between = (cdist(u[rows], failed[f]) < width) & (cdist(u[rows], ok[s]) < width)
        inside[rows] = between.any(1)
    return inside


@dataclass
class FailureModel:
    """A campaign's fitted failure model at one refit: the classifier (or the constant
    probability of a campaign whose every run failed), its ``min_success``, and what it was
    fitted on."""

    model: Classifier | Constant
    min_success: float
    n_successes: int
    n_failures: int
    n_fitted: int
    fit_seconds: float
    excluded: int = 0  # the candidates of the refit's ranking below min_success, left out
    weight_quantile: float = WEIGHT_QUANTILE  # the quantile of the chance of success that weighs
    bracket: float = BRACKET  # a failure and a success this near bracket the border
    bracketed: int = 0  # the candidates of the refit's ranking between them, weighed by Phi(m)

    def p_success(self, u: np.ndarray) -> np.ndarray:
        return self.model.p_success(np.asarray(u, dtype=np.float64))

    def between(self, u: np.ndarray) -> np.ndarray:
        """Whether each candidate at ``u`` lies between a failure and a success at most
        ``bracket`` apart among the runs the classifier was fitted on (:func:`bracketed`)."""
        if isinstance(self.model, Constant):
            return np.zeros(len(u), dtype=bool)
        return bracketed(self.model.u, self.model.success, u, self.bracket)

    def weigh(
        self, u: np.ndarray, between: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """For candidates at ``u`` (``m x d``): the mask of those kept (probability of success
        at least ``min_success``) and every candidate's weight, the ``weight_quantile``
        quantile of its chance of success (:func:`success_quantile`), the median where the
        candidate is bracketed (``between``, :meth:`between`'s when not given). A
        :class:`Constant` (no run has succeeded) prefers no place and leaves none out: the
        ranking is the acquisition's."""
        u = np.asarray(u, dtype=np.float64)
        if isinstance(self.model, Constant):
            p = self.model.p_success(u)
            return np.ones(len(p), dtype=bool), p
        mean, var = self.model.latent(u)
        p = predictive_probability(mean, var, self.model.likelihood)
        weight = success_quantile(mean, var, self.model.likelihood, self.weight_quantile)
        between = self.between(u) if between is None else between
        weight[between] = success_quantile(mean[between], var[between], self.model.likelihood, 0.5)
        return p >= self.min_success, weight

    def to_dict(self) -> dict:
        """The model body's ``failures``: the classifier and what it was fitted on."""
        return {
            "model": self.model.to_dict(),
            "min_success": self.min_success,
            "n_successes": self.n_successes,
            "n_failures": self.n_failures,
            "n_fitted": self.n_fitted,
            "fit_seconds": self.fit_seconds,
            "excluded": self.excluded,
            "weight_quantile": self.weight_quantile,
            "bracket": self.bracket,
            "bracketed": self.bracketed,
        }

    @classmethod
    def from_dict(cls, body: dict) -> FailureModel:
        return cls(
            from_dict(body["model"]),
            float(body["min_success"]),
            int(body["n_successes"]),
            int(body["n_failures"]),
            int(body["n_fitted"]),
            float(body.get("fit_seconds", 0.0)),
            int(body.get("excluded", 0)),
            float(body.get("weight_quantile", WEIGHT_QUANTILE)),
            float(body.get("bracket", 0.0)),
            int(body.get("bracketed", 0)),
        )


def fit_campaign(
    spec: dict, labels: list[dict], failures: list[dict], seed: int, limit: int = MAX_RUNS
) -> FailureModel | None:
    """The campaign's failure model on its ``labels`` and ``failures`` (the failed runs it
    counts), or None when it has none (``"model": "none"``, or no failed run: nothing is fitted
    and the ranking is the acquisition's, bit for bit)."""
    kind, min_success, quantile, bracket = failure_options(spec)
    if kind == "none" or not failures:
        return None
    started = time.perf_counter()
    space = Space.of(spec["inputs"])
    u, success = outcomes(space, labels, failures)
    rows = bounded(u, success, seed, limit)
    model = fit(u[rows], success[rows], seed=seed, choice=space.one_hot)
    return FailureModel(
        model,
        min_success,
        len(labels),
        len(failures),
        len(rows),
        time.perf_counter() - started,
        weight_quantile=quantile,
        bracket=bracket,
    )


def of_model(model: dict | None) -> FailureModel | None:
    """The failure model a stored model body holds (None: none)."""
    body = (model or {}).get("failures")
    return None if body is None else FailureModel.from_dict(body)
