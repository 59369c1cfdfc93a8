"""A multi-fidelity campaign's model, taken home: :class:`FidelityMetamodel` reads the document
that ``GET /campaigns/{id}/model/export`` answers for a campaign with fidelities
(``format_version`` 4; ``Metamodel.load`` hands such a document here) and predicts every level
as ``POST /campaigns/{id}/predict`` does, with numpy alone.

```python
from fbgp_al import Metamodel

model = Metamodel.load("campaign.json")          # a FidelityMetamodel
model.levels                                     # ["coarse", "fine"]: the last is the top
model.predict([[0.3]])["mixture_mean"]           # the top level
model.predict([[0.3]], fidelity="coarse")        # another level
```

The model is the service's (``worker/fidelity/model.py``): level ``t`` is ``rho_{t-1}`` times
the level below plus a GP of its own (an ARD RBF kernel of lengthscales ``l_t`` and variance
``v_t``, ``v_0 = 1``), each level with a noise of its own; inputs scaled to the unit cube by the
declared bounds, the labels of every level standardized together. Each draw of the document's
``fidelity.theta`` is laid out as its ``names`` say. ``mean`` and ``variance`` are those of the
draw of the highest posterior density (``fidelity.mode``), ``mixture_mean`` and
``mixture_variance`` those of the equal-weight mixture of the draws; variances are of y, each
level's noise included.
"""

from __future__ import annotations

import numpy as np

from fbgp_al.clients.failure_model import FailureModel
from fbgp_al.clients.numpy_gp import cholesky
from fbgp_al.clients.prediction import Prediction
from fbgp_al.worker.vocabulary.space import Space

FORMAT_VERSION = 4
KERNEL = "ar1-rbf-ard"


class FidelityMetamodel:
    """An exported multi-fidelity model (see the module's docstring): ``levels`` (lowest
    first), ``costs``, ``inputs`` (as declared), ``version``, ``n_labeled`` and ``campaign``
    are the document's; ``rho`` each learned ``rho``'s posterior summary."""

    def __init__(self, document: dict):
        if document.get("format_version") != FORMAT_VERSION or document.get("kernel") != KERNEL:
            raise ValueError(f"not a multi-fidelity model (format_version 4, kernel {KERNEL!r})")
        try:
            self._read(document)
        except (KeyError, TypeError, IndexError) as error:
            raise ValueError(f"the document is malformed: {error!r}") from None

    def _read(self, document: dict) -> None:
        self.document = document
        self.campaign = dict(document.get("campaign", {}))
        self.version, self.n_labeled = int(document["version"]), int(document["n_labeled"])
        self.inputs = [dict(i) for i in document["inputs"]]
        self.levels = [f["name"] for f in document["fidelities"]]
        self.costs = [float(f["cost"]) for f in document["fidelities"]]
        self.space = Space.of(self.inputs)
        t = document["transform"]
        self.y_mean, self.y_std = float(t["y_mean"]), float(t["y_std"])
        body = document["fidelity"]
        self.rho = body["rho"]
        self.theta = np.asarray(body["theta"], dtype=np.float64)
        self.mode = int(body["mode"])
        self.floor = float(body["noise_floor"])
        data = document["data"]
        self._u = self.space.to_gp(data["x"])
        self._t = self._index(data["fidelity"])
        self._z = (np.asarray(data["y"], dtype=np.float64) - self.y_mean) / self.y_std
        if not (len(self._u) == len(self._t) == len(self._z) == self.n_labeled):
            raise ValueError("the document's data need n_labeled points, levels and labels")
        T, d = len(self.levels), self._u.shape[1]
        if self.theta.ndim != 2 or self.theta.shape[1] != T * d + 3 * T - 2:
            raise ValueError(f"the document's draws need {T * d + 3 * T - 2} values each")
        if not (np.isfinite(self.theta).all() and np.isfinite(self._z).all()):
            raise ValueError("the document's draws and data must be finite")
        self._fits: dict[int, tuple] = {}
        failures = document.get("failures")  # over the declared inputs' features and the level
        self.failures = None if failures is None else FailureModel(failures, d + T)

    def _index(self, names) -> np.ndarray:
        order = {name: t for t, name in enumerate(self.levels)}
        unknown = [n for n in names if n not in order]
        if unknown:
            raise ValueError(f"unknown fidelity {unknown[0]!r}: one of {self.levels}")
        return np.array([order[n] for n in names], dtype=np.int64)

    def _split(self, row: np.ndarray):
        """A draw -> lengthscales (``T x d``), variances (``T``), rhos and noise variances."""
        T, d = len(self.levels), self._u.shape[1]
        i = T * d
        ell = np.exp(row[:i]).reshape(T, d)
        variances = np.r_[1.0, np.exp(row[i : i + T - 1])]
        rho = row[i + T - 1 : i + 2 * (T - 1)]
        noise = row[i + 2 * (T - 1) :]
        return ell, variances, rho, self.floor + np.exp(noise[0] + np.r_[0.0, noise[1:]])

    def _covariance(self, u1, t1, u2, t2, ell, variances, rho) -> np.ndarray:
        """``Cov(f_t1(u1), f_t2(u2))``: the sum over the levels ``k`` below both of
        ``c_k(t1) c_k(t2) v_k k_k(u1, u2)``, ``c_k(t)`` the product of the rhos from ``k`` to
        ``t``."""
        T = len(self.levels)

        def scales(t):
            out = np.zeros((len(t), T))
            for k in range(T):
                c = np.ones(len(t))
                for j in range(k, T - 1):
                    c = c * np.where(t > j, rho[j], 1.0)
                out[:, k] = np.where(t >= k, c, 0.0)
            return out

        c1, c2 = scales(t1), scales(t2)
        K = np.zeros((len(u1), len(u2)))
        for k in range(T):
            a, b = u1 / ell[k], u2 / ell[k]
            sq = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T
            K += np.outer(c1[:, k], c2[:, k]) * variances[k] * np.exp(-0.5 * np.maximum(sq, 0.0))
        return K

    def _fit(self, j: int):
        if j not in self._fits:
            ell, v, rho, noise = self._split(self.theta[j])
            u, t = self._u, self._t
            K = self._covariance(u, t, u, t, ell, v, rho) + np.diag(noise[t])
            L = cholesky(K[None])[0]
            alpha = np.linalg.solve(L.T, np.linalg.solve(L, self._z))
            self._fits[j] = (L, alpha, ell, v, rho, noise)
        return self._fits[j]

    def _moments(self, j: int, u: np.ndarray, level: int):
        """Draw ``j``'s mean and variance of y at ``u``, level ``level``."""
        L, alpha, ell, v, rho, noise = self._fit(j)
        t = np.full(len(u), level)
        k = self._covariance(self._u, self._t, u, t, ell, v, rho)
        A = np.linalg.solve(L, k)
        prior = float(np.diagonal(self._covariance(u[:1], t[:1], u[:1], t[:1], ell, v, rho))[0])
        return k.T @ alpha, np.maximum(prior - (A * A).sum(0), 0.0) + noise[level]

    def predict(self, x, fidelity: str | None = None) -> Prediction:
        """At ``x`` (``m`` points of the declared inputs, original units), at level
        ``fidelity`` (default the top): ``mean`` and ``variance`` of y under the mode draw,
        ``mixture_mean`` and ``mixture_variance`` under the draws' mixture, and ``p_success``
        where the model holds a failure model, as ``/predict`` answers them."""
        level = len(self.levels) - 1 if fidelity is None else int(self._index([fidelity])[0])
        u = np.atleast_2d(np.asarray(self.space.to_gp(x), dtype=np.float64))
        mode_mean, mode_var = self._moments(self.mode, u, level)
        each = [self._moments(j, u, level) for j in range(len(self.theta))]
        means, variances = np.array([m for m, _ in each]), np.array([v for _, v in each])
        p = None
        if self.failures is not None:
            p = self.failures.p_success(np.c_[u, np.eye(len(self.levels))[np.full(len(u), level)]])
        return Prediction(
            mean=self.y_mean + self.y_std * mode_mean,
            variance=self.y_std**2 * mode_var,
            mixture_mean=self.y_mean + self.y_std * means.mean(0),
            mixture_variance=self.y_std**2 * (variances.mean(0) + means.var(0)),
            model_version=self.version,
            p_success=p,
        )
