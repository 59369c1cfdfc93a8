"""Outputs in the GP's units (:mod:`worker.transforms`): standardized by the labels with
``ddof=1`` (``ddof=0`` for a single label), a constant output keeping unit scale."""

import pytest
import torch

from fbgp_al.worker.transforms import OutputStandardization


def test_outputs_standardized_with_ddof1():
    y = [1.0, 2.0, 4.0]
    s = OutputStandardization.from_labels(y)
    assert s.mean == pytest.approx(7 / 3)
    assert s.std == pytest.approx(torch.tensor(y, dtype=torch.float64).std(correction=1).item())
    z = s.to_z(y)
    assert z.mean().abs() < 1e-12 and z.std(correction=1) == pytest.approx(1.0)
    assert torch.allclose(s.mean_from_z(z), torch.tensor(y, dtype=torch.float64))
    assert s.variance_from_z(torch.tensor(1.0)) == pytest.approx(s.std**2)


def test_single_label_uses_ddof0_and_constant_labels_keep_unit_scale():
    assert OutputStandardization.from_labels([3.0]).std == 1.0  # ddof=0 of one value is 0 -> 1
    s = OutputStandardization.from_labels([2.0, 2.0, 2.0])
    assert s.std == 1.0 and torch.all(s.to_z([2.0, 2.0]) == 0)
    with pytest.raises(ValueError):
        OutputStandardization.from_labels([])
