"""The seven simulators against their published definitions (VLSE, Surjanovic & Bingham; the
paper's appendix for Motorcycle), their noise, and their pools; and the two-output ``branin2``."""

import math
import time

import numpy as np
import pytest
from scipy.optimize import minimize, minimize_scalar

from fbgp_al.clients.reproduction.protocol import grid_pool, pool_points
from fbgp_al.clients.simulators import MULTI_SIMULATORS, SIMULATORS, MultiSimulator, get_simulator

PI = math.pi

# name: (d, bounds, noise sd, points per dim, pool size)
EXPECTED = {
    "gramacy1d": (1, [(0.5, 2.5)], 0.1, 101, 101),
    "higdon": (1, [(0, 20)], 0.1, 101, 101),
    "gramacy2d": (2, [(-2, 6), (-2, 6)], 0.05, 100, 10_000),
    "branin": (2, [(-5, 10), (0, 15)], 11.32, 100, 10_000),
    "ishigami": (3, [(-PI, PI)] * 3, 0.187, 100, 1_000_000),
    "hartmann6": (6, [(0, 1)] * 6, 0.0192, 100, 10**12),
    "motorcycle": (1, [(0, 100)], None, 101, 101),
}


def test_names_and_unknown():
    assert set(SIMULATORS) == set(EXPECTED)
    with pytest.raises(KeyError, match="unknown simulator"):
        get_simulator("rosenbrock")


@pytest.mark.parametrize("name", list(EXPECTED))
def test_shapes_bounds_noise_and_pool(name):
    d, bounds, sd, k, size = EXPECTED[name]
    sim = get_simulator(name)
    assert sim.dim == d
    np.testing.assert_allclose(np.array(sim.bounds, dtype=float), np.array(bounds, dtype=float))
    assert sim.pool == {"type": "grid", "points_per_dim": k}
    assert sim.pool_size == size == grid_pool(sim).size
    assert [i["name"] for i in sim.inputs()] == [f"x{j + 1}" for j in range(d)]

    rng = np.random.default_rng(0)
    X = sim.from_unit(rng.random((7, d)))
    assert sim.mean(X).shape == sim.noise_std(X).shape == sim.sample(X, rng).shape == (7,)
    if sd is not None:
        np.testing.assert_array_equal(sim.noise_std(X), np.full(7, sd))
    assert np.all((sim.to_unit(X) >= 0) & (sim.to_unit(X) <= 1))
    np.testing.assert_allclose(sim.from_unit(sim.to_unit(X)), X)
    with pytest.raises(ValueError, match="shape"):
        sim.mean(np.zeros((2, d + 1)))

    # the pool's corner points are the box's corners, in original units
    last = grid_pool(sim).size - 1
    np.testing.assert_allclose(pool_points(sim, [0, last]), [sim.lower, sim.upper])


def test_sample_is_mean_plus_scaled_noise_and_seeded():
    sim = get_simulator("motorcycle")
    X = np.full((20_000, 1), 60.0)  # table sd 0.8886, mean 0.9589 at x = 60
    a = sim.sample(X, np.random.default_rng(3))
    b = sim.sample(X, np.random.default_rng(3))
    np.testing.assert_array_equal(a, b)
    assert a.mean() == pytest.approx(0.9589, abs=0.03)
    assert a.std() == pytest.approx(0.8886, rel=0.03)
    eps = np.random.default_rng(3).standard_normal(20_000)
    np.testing.assert_allclose(a, 0.9589 + 0.8886 * eps)


def test_gramacy1d():
    sim = get_simulator("gramacy1d")
    x = np.array([0.5, 0.55, 1.0, 2.5])
    want = [0.0625, -1 / 1.1 + 0.45**4, 0.0, 1.5**4]  # sin(10 pi x) = 0, -1, 0, 0
    np.testing.assert_allclose(sim.mean(x), want, atol=1e-12)
    # VLSE: global minimum f(0.548563444) = -0.869011135 on [0.5, 2.5]
    res = minimize_scalar(
        lambda t: sim.mean([t])[0], bounds=(0.5, 0.6), method="bounded", options={"xatol": 1e-10}
    )
    assert res.x == pytest.approx(0.548563444, abs=1e-6)
    assert res.fun == pytest.approx(-0.869011135, abs=1e-8)


def test_higdon_piecewise():
    sim = get_simulator("higdon")
    x = np.array([0, 2.5, 5, 9.999999, 10, 15, 20])
    # below 10: sin(pi x/5) + 0.2 cos(4 pi x/5); from 10 on: x/10 - 1 (a jump of 0.2 at 10)
    want = [0.2, 1.2, 0.2, 0.2, 0.0, 0.5, 1.0]
    np.testing.assert_allclose(sim.mean(x), want, atol=1e-5)


def test_gramacy2d():
    sim = get_simulator("gramacy2d")
    X = np.array([[1 / math.sqrt(2), 0], [-1 / math.sqrt(2), 0], [1, 1], [0, 3], [6, 6]])
    peak = math.exp(-0.5) / math.sqrt(2)  # 0.42888..., the maximum
    want = [peak, -peak, math.exp(-2), 0.0, 6 * math.exp(-72)]
    np.testing.assert_allclose(sim.mean(X), want, atol=1e-15)
    assert peak == pytest.approx(0.428881, abs=1e-6)


def test_branin_forrester():
    sim = get_simulator("branin")
    # the three minimizers of the original Branin (0.397887) plus Forrester's 5 x1
    X = np.array([[-PI, 12.275], [PI, 2.275], [9.42478, 2.475]])
    np.testing.assert_allclose(sim.mean(X), 0.397887 + 5 * X[:, 0], atol=1e-5)
    # hand-computed corner: x = (0, 0): (-6)^2 + 10 (1 - 1/(8 pi)) cos 0 + 10 = 55.602...
    assert sim.mean([[0.0, 0.0]])[0] == pytest.approx(36 + 10 * (1 - 1 / (8 * PI)) + 10)
    # the modified form's global minimum (VLSE): f(-3.689, 13.630) = -16.644022
    res = minimize(
        lambda x: sim.mean(x[None])[0],
        [-3.7, 13.6],
        method="Nelder-Mead",
        options={"xatol": 1e-9, "fatol": 1e-12},
    )
    np.testing.assert_allclose(res.x, [-3.689, 13.630], atol=1e-3)
    assert res.fun == pytest.approx(-16.644022, abs=1e-5)
    grid = pool_points(sim, np.arange(sim.pool_size))
    assert sim.mean(grid).min() > -16.6441


def test_ishigami():
    sim = get_simulator("ishigami")
    X = np.array([[PI / 2, PI / 2, 1], [-PI / 2, 0, 2], [0, 0, 0], [PI / 2, PI / 2, PI]])
    want = [1 + 7 + 0.1, -1 - 0.1 * 16, 0, 1 + 7 + 0.1 * PI**4]
    np.testing.assert_allclose(sim.mean(X), want, atol=1e-12)
    # known moments under uniform inputs: E = a/2, Var = a^2/8 + b pi^4/5 + b^2 pi^8/18 + 1/2
    a, b = 7, 0.1
    var = a**2 / 8 + b * PI**4 / 5 + b**2 * PI**8 / 18 + 0.5
    y = sim.mean(sim.from_unit(np.random.default_rng(1).random((400_000, 3))))
    assert y.mean() == pytest.approx(a / 2, abs=0.03)
    assert y.var() == pytest.approx(var, abs=0.2)


def _hartmann6_loops(x):
    """Hartmann 6-D written out term by term from the VLSE page."""
    alpha = [1.0, 1.2, 3.0, 3.2]
    A = [
        [10, 3, 17, 3.5, 1.7, 8],
        [0.05, 10, 17, 0.1, 8, 14],
        [3, 3.5, 1.7, 10, 17, 8],
        [17, 8, 0.05, 10, 0.1, 14],
    ]
    P = [
        [1312, 1696, 5569, 124, 8283, 5886],
        [2329, 4135, 8307, 3736, 1004, 9991],
        [2348, 1451, 3522, 2883, 3047, 6650],
        [4047, 8828, 8732, 5743, 1091, 381],
    ]
    total = 0.0
    for i in range(4):
        inner = sum(A[i][j] * (x[j] - P[i][j] * 1e-4) ** 2 for j in range(6))
        total -= alpha[i] * math.exp(-inner)
    return total


def test_hartmann6():
    sim = get_simulator("hartmann6")
    xstar = np.array([0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573])
    assert sim.mean(xstar[None])[0] == pytest.approx(-3.32237, abs=1e-5)
    res = minimize(
        lambda x: sim.mean(x[None])[0], xstar + 0.02, method="L-BFGS-B", bounds=[(0, 1)] * 6
    )
    assert res.fun == pytest.approx(-3.32237, abs=1e-5)
    np.testing.assert_allclose(res.x, xstar, atol=1e-3)
    X = np.random.default_rng(2).random((5, 6))
    np.testing.assert_allclose(sim.mean(X), [_hartmann6_loops(x) for x in X], rtol=1e-12)


def test_motorcycle_table_and_grid_inputs():
    sim = get_simulator("motorcycle")
    x = np.array([0, 35, 60, 100])
    # values from the paper's appendix listing
    np.testing.assert_array_equal(sim.mean(x), [0.5107, -1.9549, 0.9589, 0.7285])
    np.testing.assert_array_equal(sim.noise_std(x), [0.0477, 0.2915, 0.8886, 0.1542])
    # the 101-point pool is exactly the table's inputs 0..100; round-off reads the right row
    pool_x = pool_points(sim, np.arange(101))[:, 0]
    np.testing.assert_allclose(pool_x, np.arange(101), atol=1e-12)
    assert sim.mean([7.000000000000001])[0] == pytest.approx(0.4748)
    assert sim.mean(pool_x).min() == -1.9549
    with pytest.raises(ValueError, match=r"\[0, 100\]"):
        sim.mean([100.5])


def test_hartmann_pool_is_sampled_without_materializing():
    sim = get_simulator("hartmann6")
    pool = grid_pool(sim)
    start = time.perf_counter()
    index = pool.subsample(10_000, np.random.default_rng(0))
    assert time.perf_counter() - start < 2
    assert len(np.unique(index)) == 10_000 and index.max() < 10**12
    X = pool_points(sim, index)
    assert X.shape == (10_000, 6)
    # on the grid: every coordinate is a multiple of 1/99
    np.testing.assert_allclose(X * 99, np.rint(X * 99), atol=1e-9)


def test_the_two_output_simulator():
    sim = get_simulator("branin2")
    assert isinstance(sim, MultiSimulator) and "branin2" in MULTI_SIMULATORS
    assert "branin2" not in SIMULATORS  # not among the paper's benchmarks
    x = np.array([[1.0, 2.0], [9.0, 14.0]])
    means = sim.means(x)
    np.testing.assert_array_equal(means["branin"], get_simulator("branin").mean(x))
    assert np.abs(means["wave"]).max() < 0.011
    label = sim.label([1.0, 2.0], np.random.default_rng(0), known_noise=True)
    assert set(label["y"]) == set(label["noise"]) == {"branin", "wave"}
    assert label["noise"]["branin"] == pytest.approx(11.32**2)
