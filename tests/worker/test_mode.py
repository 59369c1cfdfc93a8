"""The draw that stands for a posterior's mode (:mod:`worker.mode`): the densest under scipy's
KDE of the log-hyperparameters, near the mode of a known density; the paper's rule against
scikit-learn's KernelDensity on the raw values; degenerate and non-finite draws; the seeded
subsample of many draws."""

import numpy as np
import pytest
from sklearn.neighbors import KernelDensity

from fbgp_al.worker.mode import mode_index, posterior_mode_index, raw_kde_mode_index


def test_the_densest_draw_is_near_the_mode_of_the_density():
    rng = np.random.default_rng(0)
    centre = np.array([0.5, -1.0, 2.0])
    draws = centre + 0.3 * rng.standard_normal((3000, 3))
    draws[:300] += 3.0  # a smaller second mode
    chosen = draws[posterior_mode_index(draws)]
    assert np.abs(chosen - centre).max() < 0.2


def test_the_paper_s_rule_is_scikit_learns_kernel_density_on_the_raw_values():
    rng = np.random.default_rng(1)
    values = np.exp(rng.standard_normal((400, 3)) * [0.5, 0.3, 1.0])
    scores = KernelDensity(kernel="gaussian", bandwidth=0.3).fit(values).score_samples(values)
    assert raw_kde_mode_index(values) == int(np.argmax(scores))
    log_draws = np.log(values) + 2.0
    assert mode_index(log_draws, "kde-raw", prior_mean=2.0) == int(np.argmax(scores))


def test_non_finite_draws_never_win_and_degenerate_ones_fall_back():
    values = np.array([[1.0, 1.0], [np.inf, 1.0], [1.0, 1.1], [np.nan, 0.0], [5.0, 5.0]])
    assert raw_kde_mode_index(values) in (0, 2)
    assert raw_kde_mode_index(np.full((3, 2), np.nan)) == 0
    equal = np.zeros((6, 2))
    assert posterior_mode_index(equal) == 0
    # a singular covariance: the first draw of the most frequent value
    line = np.array([[0.0, 0.0], [1.0, 1.0], [1.0, 1.0], [2.0, 2.0]])
    assert posterior_mode_index(line) == 1


def test_of_many_draws_a_seeded_subsample_is_looked_at():
    rng = np.random.default_rng(2)
    draws = rng.standard_normal((500, 2))
    chosen = {mode_index(draws, "kde", limit=50, seed=s) for s in range(5)}
    assert len(chosen) > 1  # each seed its own subsample
    assert mode_index(draws, "kde", limit=50, seed=3) == mode_index(draws, limit=50, seed=3)
    assert mode_index(draws, limit=500) == posterior_mode_index(draws)
    with pytest.raises(ValueError, match="unknown mode rule"):
        mode_index(draws, "median")
