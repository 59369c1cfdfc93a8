"""The deterministic simulator's recorded campaign (:mod:`clients.reproduction.noise_free`): its
labels are the noise-free Gramacy & Lee function's values at the points it chose (to the
digits the points are stored with), each chosen once, and a campaign of its first ``n`` takes
the MCMC settings it is given."""

import numpy as np

from fbgp_al.clients.reproduction.noise_free import campaign, gramacy_lee, recorded


def test_the_recorded_labels_are_the_functions_values_at_distinct_points():
    data = recorded()
    assert len(data["x"]) == len(data["y"]) >= 81  # the refit that never finished without a floor
    assert len({tuple(x) for x in data["x"]}) == len(data["x"])
    # the points are stored to about ten digits: their values to about 1e-9
    np.testing.assert_allclose(data["y"], [gramacy_lee(x) for x in data["x"]], rtol=0, atol=1e-8)
    assert all(0.5 <= x[0] <= 2.5 for x in data["x"])


def test_a_campaign_of_the_first_labels_takes_the_mcmc_given():
    spec, labels = campaign(5, {"chains": 2})
    assert spec["mcmc"] == {"chains": 2} and spec["inputs"] == recorded()["spec"]["inputs"]
    assert [label["x"] for label in labels] == recorded()["x"][:5]
    assert gramacy_lee([1.0]) == np.sin(10 * np.pi) / 2  # (x - 1)^4 vanishes at 1
