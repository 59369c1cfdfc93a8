"""An exported model's failure model, with numpy alone: the probability that a run at a point
succeeds, as ``/predict``'s ``p_success`` gives it (``worker/feasibility/``).

The service's classifier is a GP over the GP's features ``u`` (the unit cube, a choice one-hot)
with the kernel ``s2 exp(-|(u - u') / l|^2 / 2) + b2`` and a probit likelihood, its latent
posterior expectation propagation's: Gaussian sites of precisions ``tau`` and ``tau``-scaled
means ``nu`` at the runs. At a point, the latent's mean is ``k*' alpha`` with ``alpha = nu -
S^1/2 B^-1 S^1/2 K nu`` and ``B = I + S^1/2 K S^1/2`` (``S = diag(tau)``), its variance ``k** -
|L^-1 S^1/2 k*|^2`` (``L L' = B``), and ``P(success) = Phi(mean / sqrt(1 + variance))`` (GPML
Algorithms 3.5 and 3.6). A model whose every run failed is one probability everywhere.
"""

from __future__ import annotations

import math

import numpy as np

from fbgp_al.clients.numpy_gp import JITTERS  # the same as worker.feasibility's

CHUNK_ELEMENTS = 1 << 22  # the n x chunk cross-kernel of one chunk of points (32 MB)
_ERFC = np.vectorize(math.erfc, otypes=[float])


def normal_cdf(x: np.ndarray) -> np.ndarray:
    """``Phi(x)``, by ``erfc`` (accurate in both tails)."""
    return 0.5 * _ERFC(-np.asarray(x, dtype=float) / math.sqrt(2.0))


def _kernel(u1, u2, lengthscale, variance: float, bias: float) -> np.ndarray:
    a, b = u1 / lengthscale, u2 / lengthscale
    sq = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * (a @ b.T)
    return variance * np.exp(-0.5 * np.maximum(sq, 0.0)) + bias


def _cholesky(B: np.ndarray) -> np.ndarray:
    for jitter in (0.0, *JITTERS):
        try:
            return np.linalg.cholesky(B + jitter * np.eye(len(B)))
        except np.linalg.LinAlgError:
            continue
    raise ValueError("the document's failure model has no Cholesky factor")


class FailureModel:
    """The document's ``failures`` (its ``model``): :meth:`p_success` at the GP's features."""

    def __init__(self, body: dict, features: int):
        model = body["model"]
        self.constant = None
        if model.get("kind") == "constant":
            self.constant = float(model["p"])
            return
        if model.get("likelihood", "probit") != "probit" or model.get("inference") != "ep":
            raise ValueError(
                "the document's failure model is not one this SDK reads (probit, "
                "EP); upgrade fbgp-al"
            )
        self.lengthscale = np.asarray(model["lengthscale"], dtype=float).reshape(-1)
        tau, nu = (np.asarray(model[k], dtype=float).reshape(-1) for k in ("tau", "nu"))
        self.u = np.asarray(model["u"], dtype=float).reshape(len(tau), -1)
        self.variance, self.bias = float(model["variance"]), float(model["bias"])
        if self.u.shape[1] != features or len(self.lengthscale) != features:
            raise ValueError(
                f"the document's failure model is not over the model's {features} features"
            )
        K = _kernel(self.u, self.u, self.lengthscale, self.variance, self.bias)
        self.sW = np.sqrt(tau)
        self.L = _cholesky(np.eye(len(tau)) + self.sW[:, None] * K * self.sW[None, :])
        inner = np.linalg.solve(self.L.T, np.linalg.solve(self.L, self.sW * (K @ nu)))
        self.alpha = nu - self.sW * inner
        # L^-1 S^1/2, kept: a point's variance in one product
        self.whitened = np.linalg.solve(self.L, np.eye(len(tau))) * self.sW[None, :]

    def p_success(self, u: np.ndarray) -> np.ndarray:
        """The probability that a run succeeds at each row of ``u`` (``m x`` the features)."""
        if self.constant is not None:
            return np.full(len(u), self.constant)
        out = np.empty(len(u))
        step = max(1, CHUNK_ELEMENTS // max(1, len(self.u)))
        for i in range(0, len(u), step):
            k = _kernel(self.u, u[i : i + step], self.lengthscale, self.variance, self.bias)
            v = self.whitened @ k
            var = np.maximum(self.variance + self.bias - (v * v).sum(0), 0.0)
            out[i : i + step] = normal_cdf((self.alpha @ k) / np.sqrt(1.0 + var))
        return out
