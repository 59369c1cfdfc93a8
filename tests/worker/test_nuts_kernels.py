"""The compiled tree bookkeeping of NUTS (:mod:`worker.nuts_kernels`), its small kernels on their
own: the log of a sum of exponentials, the generalized U-turn criterion, and one chain's inverse
mass matrix times a momentum. (The tree's growth is checked through the sampler, in
``test_nuts.py``.)"""

import math

import numpy as np
import pytest

from fbgp_al.worker.nuts_kernels import _logaddexp, _mass_times, _turned


@pytest.mark.parametrize(
    "a,b", [(0.0, 0.0), (-1000.0, -1001.5), (3.0, -math.inf), (-math.inf, 2.0), (700.0, 710.0)]
)
def test_logaddexp_is_numpys_without_overflow(a, b):
    assert _logaddexp(a, b) == pytest.approx(np.logaddexp(a, b), rel=1e-15, abs=1e-12)


def test_logaddexp_of_two_zero_weights_is_a_zero_weight():
    assert _logaddexp(-math.inf, -math.inf) == -math.inf


def test_a_span_turned_when_either_end_no_longer_moves_along_its_momentum_sum():
    rho = np.array([1.0, 2.0])
    ahead, back, across = np.array([1.0, 0.5]), np.array([-1.0, 0.0]), np.array([2.0, -1.0])
    assert not _turned(rho, ahead, ahead)
    assert _turned(rho, ahead, back) and _turned(rho, back, ahead)
    assert _turned(rho, across, ahead)  # at right angles (p_sharp . rho = 0): turned


def test_mass_times_is_the_matrix_product():
    rng = np.random.default_rng(0)
    m, p = rng.standard_normal((4, 4)), rng.standard_normal(4)
    out = np.empty(4)
    _mass_times(m, p, out)
    np.testing.assert_allclose(out, m @ p, rtol=1e-14)
