"""The sampler's warm-up against Stan's: its adaptation windows, and a window's regularized
estimate of the inverse mass matrix against numpy's covariance."""

import numpy as np

from fbgp_al.worker import nuts_adaptation


def test_stan_adaptation_windows():
    s = nuts_adaptation.NutsSettings()
    assert nuts_adaptation.adaptation_windows(200, s) == [(75, 100), (100, 150)]
    assert nuts_adaptation.adaptation_windows(1000, s) == [
        (75, 100),
        (100, 150),
        (150, 250),
        (250, 450),
        (450, 950),
    ]
    # short warm-ups shrink the buffers as Stan does: 15% / 75% / 10%
    assert nuts_adaptation.adaptation_windows(100, s) == [(15, 90)]
    assert nuts_adaptation.adaptation_windows(10, s) == []


def test_dense_window_estimate_is_regularized_as_stan_does():
    s = nuts_adaptation.NutsSettings(dense_mass=True)
    adapt = nuts_adaptation.ChainAdaptation(1.0, 100, s, 2)  # one window: iterations 15..89
    rng = np.random.default_rng(0)
    points = rng.multivariate_normal([1.0, -1.0], [[2.0, 0.6], [0.6, 0.5]], 100)
    out = [adapt.observe(i, points[i]) for i in range(100)]
    estimates = [(i, m) for i, m in enumerate(out) if m is not None]
    assert [i for i, _ in estimates] == [89]
    n = 75
    expected = (n / (n + 5)) * np.cov(points[15:90].T) + 1e-3 * (5 / (n + 5)) * np.eye(2)
    assert np.allclose(estimates[0][1], expected, rtol=1e-12, atol=1e-14)
    diag = nuts_adaptation.ChainAdaptation(1.0, 100, nuts_adaptation.NutsSettings(), 2)
    last = [diag.observe(i, points[i]) for i in range(100)][89]
    assert np.allclose(last, np.diag(np.diagonal(expected)), rtol=1e-12, atol=1e-14)
