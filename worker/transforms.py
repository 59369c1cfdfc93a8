"""The GP's float64 tensors, and outputs in its units (docs/concepts/how-it-works.md).

Outputs are standardized by the labels: ``z = (y - mean) / std`` with ``ddof=1`` (``ddof=0`` for a
single label; a constant output keeps ``std = 1`` so that ``z = 0``). Inputs go to the unit cube
by the declared bounds: :class:`worker.spec.design.Box`, which the API shares.
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
    """``z = (y - mean) / std``; predictive moments map back with :meth:`mean_from_z` and
    :meth:`variance_from_z`."""

    mean: float
    std: float

    @classmethod
    def from_labels(cls, y) -> OutputStandardization:
        y = as_tensor(y).reshape(-1)
        if y.numel() == 0:
            raise ValueError("standardizing needs at least one label")
        std = float(y.std(correction=1 if y.numel() > 1 else 0))
        return cls(mean=float(y.mean()), std=std if std > 0 else 1.0)

    def to_z(self, y) -> torch.Tensor:
        return (as_tensor(y) - self.mean) / self.std

    def mean_from_z(self, z_mean) -> torch.Tensor:
        return self.mean + as_tensor(z_mean) * self.std

    def variance_from_z(self, z_variance) -> torch.Tensor:
        return as_tensor(z_variance) * self.std**2

    def variance_to_z(self, variance) -> torch.Tensor:
        """Variances of ``y`` (a label's known noise) in the GP's units, ``variance / std^2``;
        at most ``MAX_VARIANCE_Z`` (a label with so much noise tells the GP nothing either way,
        and its covariance stays finite)."""
        return (as_tensor(variance) / self.std**2).clamp_max(MAX_VARIANCE_Z)
