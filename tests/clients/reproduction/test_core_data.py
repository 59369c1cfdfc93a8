"""The data of ``fbgp-al bench-core`` (:mod:`clients.reproduction.core_data`): a simulator's
seeded data in the unit cube with standardized outputs, a campaign's labels as a refit sees them,
and how far two posteriors agree, in the reference's standard deviations."""

import numpy as np
import torch

from fbgp_al.clients.reproduction.core_data import agreement, campaign_data, data


def test_the_data_is_seeded_in_the_unit_cube_and_standardized():
    u, z = data("branin", 40, seed=3)
    assert u.shape == (40, 2) and z.shape == (40,) and u.dtype == torch.float64
    assert float(u.min()) >= 0 and float(u.max()) <= 1
    assert abs(float(z.mean())) < 1e-12 and abs(float(z.std()) - 1) < 1e-12
    again, _ = data("branin", 40, seed=3)
    assert torch.equal(u, again) and not torch.equal(u, data("branin", 40, seed=4)[0])


def test_a_campaigns_data_is_its_first_labeled_points():
    u, z = campaign_data("gramacy1d", 10)
    assert u.shape == (10, 1) and len(torch.unique(u)) == 10
    assert abs(float(z.std()) - 1) < 1e-12
    more, _ = campaign_data("gramacy1d", 12)
    assert torch.equal(more[:10], u)  # the first ten, then two more


def test_agreement_is_the_largest_quantile_gap_in_reference_sds():
    rng = np.random.default_rng(0)
    reference = rng.standard_normal((20_000, 2))
    assert agreement(reference, reference) == 0.0
    shifted = reference + np.array([0.0, 0.5]) * reference.std(0)
    assert abs(agreement(shifted, reference) - 0.5) < 1e-9
