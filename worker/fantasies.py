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
"""

from __future__ import annotations

import torch

from fbgp_al.worker.gp import Conditioned, rbf
from fbgp_al.worker.transforms import DTYPE

# From this many labels a greedy batch conditions its draws on its picks (this module); below,
# each pick refits them, as before (the same picks, bit for bit, on small campaigns)
CONDITIONED_FROM = 200
PRODUCT_ELEMENTS = 1 << 24  # a group's L^-1 k at the shortlist, in parts of at most this


class Fantasized:
    """Each draw's latent covariance at a shortlist of points, conditioned on fantasy runs at
    some of them (:meth:`add`), and the variances of y there (:meth:`variances`)."""

    def __init__(self, covariance: torch.Tensor, noise: torch.Tensor):
        self.covariance, self.noise = covariance, noise  # draws x S x S; draws
        self.latent = covariance.diagonal(dim1=-2, dim2=-1).clone()  # draws x S
        self.steps: list[torch.Tensor] = []

    @classmethod
    def of(cls, gps, points: torch.Tensor) -> Fantasized:
        """The draws' GPs ``gps`` (:class:`worker.acquisition.DrawGPs`) at ``points``
        (``S x d``), their latent covariance ``k(S, S) - (L^-1 k(X, S))^T (L^-1 k(X, S))``
        computed group of draws by group, in parts of draws that keep ``L^-1 k`` within
        ``PRODUCT_ELEMENTS``."""
        draws, n, size = len(gps.noise), len(gps.u), len(points)
        covariance = torch.empty(draws, size, size, dtype=DTYPE)
        per = max(1, PRODUCT_ELEMENTS // max(1, n * size))
        for g in [slice(0, draws)] if gps.whole is not None else gps.groups:
            fitted = gps.whole
            if fitted is None:
                fitted = Conditioned.fit(
                    gps.u, gps.z, gps.lengthscale[g], gps.noise[g], gps.label_noise
                )
            first, count = g.start, len(range(draws)[g])
            for start in range(0, count, per):
                stop = min(start + per, count)
                ls = fitted.lengthscale[start:stop]
                v = fitted.chol_inv[start:stop] @ rbf(gps.u, points, ls)  # b x n x S
                covariance[first + start : first + stop] = rbf(points, points, ls) - (
                    v.transpose(-1, -2) @ v
                )
        return cls(covariance, gps.noise)

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
