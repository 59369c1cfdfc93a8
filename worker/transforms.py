"""The GP's float64 tensors, and outputs in its units (docs/concepts/how-it-works.md).

Outputs are standardized by the labels: ``z = (y - mean) / std`` with ``ddof=1`` (``ddof=0`` for a
single label; a constant output keeps ``std = 1`` so that ``z = 0``); an output declared
``"transform": "log"`` is ``log y`` standardized so (its predictions go back to ``y`` by
:mod:`worker.vocabulary.lognormal`). Inputs go to the unit cube by the declared bounds:
:class:`worker.vocabulary.design.Box`, which the API shares.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

DTYPE = torch.float64
# the largest known noise variance in the GP's units (see OutputStandardization.variance_to_z)
MAX_VARIANCE_Z = 1e200


def as_tensor(values) -> torch.Tensor:
    """``values`` as a float64 tensor (no copy when it already is one)."""
    return torch.as_tensor(values, dtype=DTYPE)


@dataclass(frozen=True)
class OutputStandardization:
    """``z = (y - mean) / std``, or with ``log`` ``z = (log y - mean) / std`` (``mean`` and
    ``std`` then those of ``log y``); predictive moments of an output modeled as is map back
    with :meth:`mean_from_z` and :meth:`variance_from_z`."""

    mean: float
    std: float
    log: bool = False

    @classmethod
    def from_labels(cls, y, log: bool = False) -> OutputStandardization:
        y = as_tensor(y).reshape(-1)
        if y.numel() == 0:
            raise ValueError("standardizing needs at least one label")
        if log:
            y = torch.log(y)
        std = float(y.std(correction=1 if y.numel() > 1 else 0))
        return cls(mean=float(y.mean()), std=std if std > 0 else 1.0, log=log)

    def modeled(self, y) -> torch.Tensor:
        """``y`` as the GP models it: ``log y`` with ``log``, else ``y``."""
        y = as_tensor(y)
        return torch.log(y) if self.log else y

    def to_z(self, y) -> torch.Tensor:
        return (self.modeled(y) - self.mean) / self.std

    def mean_from_z(self, z_mean) -> torch.Tensor:
        return self.mean + as_tensor(z_mean) * self.std

    def variance_from_z(self, z_variance) -> torch.Tensor:
        return as_tensor(z_variance) * self.std**2

    def variance_to_z(self, variance, y=None) -> torch.Tensor:
        """Variances of ``y`` (a label's known noise) in the GP's units, ``variance / std^2``;
        at most ``MAX_VARIANCE_Z`` (a label with so much noise tells the GP nothing either way,
        and its covariance stays finite). With ``log``, the variance of ``log y`` by the delta
        method, ``variance / y^2``, first (``y``: the labels, in their units)."""
        variance = as_tensor(variance)
        if self.log:
            if y is None:
                raise ValueError("a log output's noise variances need their labels")
            variance = variance / as_tensor(y) ** 2
        return (variance / self.std**2).clamp_max(MAX_VARIANCE_Z)

    def to_dict(self) -> dict:
        """The model body's ``y_mean``, ``y_std`` and, for a log output, ``y_transform``."""
        body = {"y_mean": self.mean, "y_std": self.std}
        if self.log:
            body["y_transform"] = "log"
        return body

    @classmethod
    def of(cls, transform: dict) -> OutputStandardization:
        """From a model body's ``transform`` (a model made before output transforms: as is)."""
        return cls(
            mean=transform["y_mean"],
            std=transform["y_std"],
            log=transform.get("y_transform", "none") == "log",
        )
