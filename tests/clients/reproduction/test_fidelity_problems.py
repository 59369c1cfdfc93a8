"""The two-level test problems (:mod:`clients.reproduction.fidelity_problems`) at the
literature's known values and relations."""

import numpy as np
import pytest

from fbgp_al.clients.reproduction.fidelity_problems import PROBLEMS


def test_forresters_minimum_and_its_cheap_level():
    p = PROBLEMS["forrester"]
    # the expensive level's global minimum, -6.0207 at x = 0.7572 (Forrester et al. 2008)
    assert p.at([[0.75725]], 1)[0] == pytest.approx(-6.0207, abs=1e-4)
    x = np.linspace(0, 1, 7)[:, None]
    np.testing.assert_allclose(p.at(x, 0), 0.5 * p.at(x, 1) + 10 * (x[:, 0] - 0.5) - 5)


def test_currins_cheap_level_averages_four_shifted_copies():
    p = PROBLEMS["currin"]
    at = np.array([[0.3, 0.6]])
    shifted = [[0.35, 0.65], [0.35, 0.55], [0.25, 0.65], [0.25, 0.55]]
    assert p.at(at, 0)[0] == pytest.approx(np.mean(p.at(np.array(shifted), 1)), rel=1e-12)
    # on x2 = 0 the exponential factor is its limit, 1: the rational function alone
    x1 = 0.4
    rational = (2300 * x1**3 + 1900 * x1**2 + 2092 * x1 + 60) / (
        100 * x1**3 + 500 * x1**2 + 4 * x1 + 20
    )
    assert p.at([[x1, 0.0]], 1)[0] == pytest.approx(rational)


def test_park_and_borehole_levels_are_related_as_written():
    park = PROBLEMS["park"]
    u = np.random.default_rng(0).random((5, 4))
    x = park.from_unit(u)
    expected = (1 + np.sin(x[:, 0]) / 10) * park.at(u, 1) - 2 * x[:, 0] + x[:, 1] ** 2
    np.testing.assert_allclose(park.at(u, 0), expected + x[:, 2] ** 2 + 0.5)
    bore = PROBLEMS["borehole"]
    u = np.random.default_rng(1).random((5, 8))
    rw, r, tu, _, tl, _, length, kw = bore.from_unit(u).T
    a = 2 * length * tu / (np.log(r / rw) * rw**2 * kw) + tu / tl
    np.testing.assert_allclose(
        bore.at(u, 0) / bore.at(u, 1), 5 / (2 * np.pi) * (1 + a) / (1.5 + a), rtol=1e-12
    )
    assert bore.from_unit([[0.0] * 8])[0, 1] == 100.0 and bore.from_unit([[1.0] * 8])[0, 1] == 5e4
