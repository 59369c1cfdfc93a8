"""One shape for a prediction, from the service (``Client.predict``) or from an exported model
(``Metamodel.predict``): ``p["mean"]`` and ``p.mean`` alike; with several outputs, one per output
name (``p["disp"]["mean"]``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np


@dataclass(frozen=True, eq=False)
class Prediction(Mapping):
    """Predictions of y at ``m`` points, in the output's units, each an array of ``m``.

    Attributes:
        mean: the posterior-mode GP's mean of y.
        variance: its variance of y, the labels' noise included (with known noise: the
            learned nugget; add a new point's own noise yourself).
        mixture_mean: the mean of the mixture of the acquisition draws' GPs (equal weights).
        mixture_variance: the mixture's variance: the draws' mean variance plus the variance
            of their means (QB-MGP's score).
        model_version: the model that answered (``None`` where unknown).
        p_success: the failure model's probability that a run at each point succeeds
            (``None`` when the model has none: no run had failed, or its campaign's
            ``failures`` is ``none``).
        median, lower, upper: an output modeled on the log scale (``"transform": "log"``; else
            ``None``): the mode GP's median of y and its central 95% interval (y is
            lognormal: ``mean`` is its mean ``exp(mu + s^2 / 2)``, ``median`` is ``exp(mu)``,
            ``lower`` and ``upper`` ``exp(mu -+ 1.96 s)``).
        mixture_median, mixture_lower, mixture_upper: the same of the mixture (its quantiles
            of log y, mapped by exp).

    It is also a read-only mapping of the four arrays (and ``p_success`` and a log output's
    quantiles where there are some): ``p["mean"]``, ``dict(p)``, ``for key, values in
    p.items()``.
    """

    mean: np.ndarray
    variance: np.ndarray
    mixture_mean: np.ndarray
    mixture_variance: np.ndarray
    model_version: int | None = None
    p_success: np.ndarray | None = None
    median: np.ndarray | None = None
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    mixture_median: np.ndarray | None = None
    mixture_lower: np.ndarray | None = None
    mixture_upper: np.ndarray | None = None

    KEYS: ClassVar[tuple[str, ...]] = ("mean", "variance", "mixture_mean", "mixture_variance")
    # a log output's, where there are some
    QUANTILES: ClassVar[tuple[str, ...]] = (
        "median",
        "lower",
        "upper",
        "mixture_median",
        "mixture_lower",
        "mixture_upper",
    )

    @classmethod
    def from_json(
        cls, body: Mapping, model_version: int | None = None, p_success=None
    ) -> Prediction:
        """From ``/predict``'s body (or one of its ``outputs``, with the body's ``p_success``)."""
        arrays = (np.asarray(body[key], dtype=float) for key in cls.KEYS)
        p = body.get("p_success", p_success)
        quantiles = {
            key: np.asarray(body[key], dtype=float)
            for key in cls.QUANTILES
            if body.get(key) is not None
        }
        return cls(
            *arrays,
            model_version=body.get("model_version", model_version),
            p_success=None if p is None else np.asarray(p, dtype=float),
            **quantiles,
        )

    def _keys(self) -> tuple[str, ...]:
        keys = self.KEYS if self.p_success is None else (*self.KEYS, "p_success")
        return keys + tuple(key for key in self.QUANTILES if getattr(self, key) is not None)

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self._keys():
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())
