"""A greedy batch's fantasies by conditioning, not refitting (:func:`worker.acquisition.
greedy_batch_outputs` from ``CONDITIONED_FROM`` labels).

Each pick of a greedy batch is a fantasy run: every draw's GP is conditioned on a label at the
picked point, with its own mean as the label and the draw's nugget ``s2`` as its noise, so that
its means stay and its variances drop near the pick. Refitting each draw's GP with the
fantasies costs ``n^3`` per draw and pick, and predicting the shortlist again ``n^2`` per
candidate: at 303 labels, 20 picks of 150 draws over 1,000 candidates took 51 s. Conditioning
the latent covariance among the shortlist's points does the same arithmetic in the shortlist's
size alone: with ``C`` the covariance of ``f`` at the shortlist (``S x S``, one per draw, under
the GP before the picks), a fantasy at point ``p`` (the ``k``-th) gives

    c_k = C[:, p] - sum_{j < k} w_j w_j[p],    w_k = c_k / sqrt(c_k[p] + s2),

and the variance of ``y`` at the shortlist after ``k`` picks is ``diag C - sum_{j <= k} w_j^2
+ s2`` (a Cholesky of the fantasies' block, one column a pick). The same numbers as a refit to
rounding (``tests/worker/test_fantasies.py``); ``C`` costs ``n^2 S + n S^2`` per draw once, and
holds ``draws x S^2`` values (1.2 GB for 150 draws and a shortlist of 1,000).

The points out for labeling (the pending runs) are fantasies too, but they are known before the
batch: ``C`` is computed at the shortlist and the points out together, under the GPs of the
labels alone, and conditioned on the points out in one block (:meth:`Fantasized.of`), so that
no draw's GP is refitted with them (an ``(n + P)^3`` factorization per draw).
"""

from __future__ import annotations

import torch

from fbgp_al.worker.gp import PRODUCT_ELEMENTS, cholesky
from fbgp_al.worker.transforms import DTYPE

# From this many labels a greedy batch conditions its draws on its picks (this module); below,
# each pick refits them, as before (the same picks, bit for bit, on small campaigns)
CONDITIONED_FROM = 200


class Fantasized:
    """Each draw's latent covariance at a shortlist of points, conditioned on fantasy runs at
    some of them (:meth:`add`), and the variances of y there (:meth:`variances`); ``mean``: the
    draws' means of y there (``draws x S``; fantasies leave them as they are)."""

    def __init__(self, covariance: torch.Tensor, noise: torch.Tensor, mean=None):
        self.covariance, self.noise = covariance, noise  # draws x S x S; draws
        self.latent = covariance.diagonal(dim1=-2, dim2=-1).clone()  # draws x S
        self.steps: list[torch.Tensor] = []
        self.mean = mean

    @classmethod
    def of(cls, gps, points: torch.Tensor, pending: torch.Tensor | None = None) -> Fantasized:
        """The draws' GPs ``gps`` (:class:`worker.acquisition.DrawGPs`, fitted to the labels)
        at ``points`` (``S x d``): their means and latent covariance
        (:meth:`worker.gp.Conditioned.joint`), group of draws by group, conditioned on fantasy
        runs at the points out ``pending`` (``P x d``; None: none) as if each had been added
        (:meth:`given`)."""
        if pending is not None and len(pending):
            return cls.of(gps, torch.cat([points, pending])).given(len(points))
        draws, size = len(gps.noise), len(points)
        mean = torch.empty(draws, size, dtype=DTYPE)
        covariance = torch.empty(draws, size, size, dtype=DTYPE)
        for g, fitted in gps.fits():
            fitted.joint(points, out=(mean[g], covariance[g]))
        return cls(covariance, gps.noise, mean)

    def given(self, size: int) -> Fantasized:
        """The state at the first ``size`` points, conditioned on fantasy runs at all the
        others at once: ``C_SS - C_SP (C_PP + s2 I)^-1 C_PS`` (a Cholesky of the ``P x P``
        block per draw, with jitter where it fails), in place, in parts of draws that keep
        each part's ``S x S`` product within ``PRODUCT_ELEMENTS``."""
        c, out = self.covariance, self.covariance.shape[-1] - size
        block = c[:, size:, size:] + self.noise[:, None, None] * torch.eye(out, dtype=DTYPE)
        chol = cholesky(block).chol
        per = max(1, PRODUCT_ELEMENTS // max(1, size * max(size, out)))
        for start in range(0, len(c), per):
            part = slice(start, start + per)
            w = torch.linalg.solve_triangular(chol[part], c[part, size:, :size], upper=False)
            c[part, :size, :size] -= w.transpose(-1, -2) @ w
        mean = None if self.mean is None else self.mean[:, :size]
        return Fantasized(c[:, :size, :size], self.noise, mean)

    def add(self, j: int) -> None:
        """A fantasy run at the shortlist's point ``j``."""
        column = self.covariance[:, :, j].clone()
        for w in self.steps:
            column -= w * w[:, j : j + 1]
        w = column / torch.sqrt(column[:, j].clamp_min(0.0) + self.noise)[:, None]
        self.steps.append(w)
        self.latent -= w * w

    def variances(self) -> torch.Tensor:
        """The variance of y at the shortlist (``draws x S``), the fantasies' included."""
        return self.latent.clamp_min(0.0) + self.noise[:, None]


def greedy_picks(first: torch.Tensor, size: int, rescored) -> tuple[torch.Tensor, torch.Tensor]:
    """A greedy batch of at most ``size`` among a shortlist: the best of ``first`` (its
    scores), then after each pick the best left of ``rescored(pick)`` (the shortlist's scores
    with the pick a fantasy; None: the scores do not change). The picks' places in the
    shortlist, in order, and their scores when picked."""
    picked, picked_scores = [], []
    available = torch.ones(len(first), dtype=torch.bool)
    current = first
    for _ in range(min(size, len(first))):
        best = int(torch.argmax(torch.where(available, current, -torch.inf)))
        picked.append(best)
        picked_scores.append(float(current[best]))
        available[best] = False
        if len(picked) < size and rescored is not None:
            current = rescored(best)
    return torch.tensor(picked, dtype=torch.long), torch.tensor(picked_scores, dtype=DTYPE)
