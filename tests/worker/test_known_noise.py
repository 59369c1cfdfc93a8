"""Known noise in a refit: labels that carry their own noise variances are put in the GP's units
(``noise_z = noise / y_std^2``, a variance too large for float64 capped), and every sampler path
of a refit, in one process or in chain groups, runs on them."""

import dataclasses

import numpy as np
import torch

from fbgp_al.worker import fitting
from tests.worker.known_noise import SPEC
from tests.worker.known_noise import labels as _labels


def test_prepare_puts_the_noise_in_the_gps_units():
    x, y, noise = [1.0, 4.0, 6.0, 9.0], [3.0, -1.0, 2.0, 0.5], [0.5, 0.0, 2.0, 0.1]
    data = fitting.prepare(SPEC, _labels(x, y, noise))
    assert np.allclose(data.noise.numpy(), np.array(noise) / np.std(y, ddof=1) ** 2)
    assert fitting.prepare({**SPEC, "noise": {"type": "learned"}}, _labels(x, y)).noise is None
    unset = {k: v for k, v in SPEC.items() if k != "noise"}
    assert fitting.prepare(unset, _labels(x, y)).noise is None
    # a variance too large for float64 in the GP's units is capped, finite
    tiny = fitting.prepare(SPEC, _labels(x, [1e-200, 2e-200, 3e-200, 0.0], [1e150] * 4))
    assert torch.isfinite(tiny.noise).all()


def test_every_sampler_path_of_a_refit_sees_the_noise():
    """The refit's sampler, in one process (``posterior``) or in chain groups (``chains``), runs
    on the labels' noise: the same seed gives other draws without it, and the first draws of
    ``chains`` are those of ``posterior``."""
    x, y = [1.0, 3.0, 4.5, 6.0, 8.5], [0.3, 1.2, -0.4, 0.8, -1.0]
    spec = dict(SPEC, mcmc={"chains": 2, "warmup": 8, "samples": 6, "thinning": 2})
    data = fitting.prepare(spec, _labels(x, y, [0.5, 0.0, 0.2, 1.0, 0.1]))
    plain = dataclasses.replace(data, noise=None)
    draws, _ = fitting.chains(spec, data)
    assert not np.allclose(draws.theta, fitting.chains(spec, plain)[0].theta)
    post = fitting.posterior(spec, data, None)
    theta = draws.theta.reshape(-1, 2)
    noise = post.diagnostics["noise_floor"] + np.exp(theta[:, 1])
    assert np.allclose(post.log_draws().numpy(), np.column_stack([theta[:, 0], np.log(noise)]))
