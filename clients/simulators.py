"""The paper's seven benchmark simulators (numpy only).

Each simulator is a noisy function ``y = mean(x) + noise_std(x) * eps`` with ``eps ~ N(0, 1)``
on a box of inputs, plus the pool of candidate inputs the paper's experiments draw from: a grid
over the box (101 points for the 1-D functions and Motorcycle, 100 per dimension otherwise).

| name | d | box | noise sd | reference (VLSE: Surjanovic & Bingham's library) |
|---|---|---|---|---|
| ``gramacy1d`` | 1 | [0.5, 2.5] | 0.1 | Gramacy & Lee (2012); VLSE ``grlee12`` |
| ``higdon`` | 1 | [0, 20] | 0.1 | Higdon (2002), Gramacy & Lee (2008); VLSE ``hig02grlee08`` |
| ``gramacy2d`` | 2 | [-2, 6]^2 | 0.05 | Gramacy & Lee (2008); VLSE ``grlee08`` |
| ``branin`` | 2 | [-5, 10] x [0, 15] | 11.32 | Branin, Forrester et al. (2008) form; VLSE |
| ``ishigami`` | 3 | [-pi, pi]^3 | 0.187 | Ishigami & Homma (1990), a = 7, b = 0.1; VLSE |
| ``hartmann6`` | 6 | [0, 1]^6 | 0.0192 | Hartmann 6-D; VLSE ``hart6`` |
| ``motorcycle`` | 1 | [0, 100] | table | the paper's appendix: a GP fitted to Silverman's data |

One simulator of two outputs (:data:`MULTI_SIMULATORS`, a :class:`MultiSimulator`), for
multi-output campaigns: ``branin2`` on Branin's box, ``branin`` (as above) and ``wave``
(``0.01 sin(x1 / 2) cos(x2 / 3)``, noise sd ``0.0005 (1 + (x1 + 5) / 15)``), outputs five orders
of magnitude apart.

Arrays: ``X`` is ``[m, d]`` in original units (a ``[m]`` vector is accepted when ``d == 1``);
``mean``, ``noise_std`` and ``sample`` return ``[m]``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources

import numpy as np


@dataclass(frozen=True)
class Simulator:
    """A noisy benchmark function on a box with a grid pool.

    ``bounds``: one ``(lower, upper)`` per input. ``points_per_dim``: grid points per input of
    the pool (the pool is the full grid over ``bounds``, addressed by flat index, never built).
    """

    name: str
    bounds: tuple[tuple[float, float], ...]
    points_per_dim: int
    mean_fn: Callable[[np.ndarray], np.ndarray]
    noise_fn: Callable[[np.ndarray], np.ndarray]

    @property
    def dim(self) -> int:
        return len(self.bounds)

    @property
    def lower(self) -> np.ndarray:
        """``[d]`` lower bounds."""
        return np.array([b[0] for b in self.bounds], dtype=float)

    @property
    def upper(self) -> np.ndarray:
        """``[d]`` upper bounds."""
        return np.array([b[1] for b in self.bounds], dtype=float)

    @property
    def pool(self) -> dict:
        """The pool as the campaign body declares it: ``{"type": "grid", "points_per_dim": k}``."""
        return {"type": "grid", "points_per_dim": self.points_per_dim}

    @property
    def pool_size(self) -> int:
        return self.points_per_dim**self.dim

    def inputs(self) -> list[dict]:
        """The campaign body's ``inputs``: ``[{"name": "x1", "lower": .., "upper": ..}, ..]``."""
        return [
            {"name": f"x{i + 1}", "lower": float(lo), "upper": float(hi)}
            for i, (lo, hi) in enumerate(self.bounds)
        ]

    def to_unit(self, X) -> np.ndarray:
        """``[m, d]`` original units -> ``[m, d]`` unit cube (scaled by the bounds)."""
        return (self.check_inputs(X) - self.lower) / (self.upper - self.lower)

    def from_unit(self, U) -> np.ndarray:
        """``[m, d]`` unit cube -> ``[m, d]`` original units."""
        return self.lower + np.asarray(U, dtype=float) * (self.upper - self.lower)

    def mean(self, X) -> np.ndarray:
        """Noise-free output ``[m]`` at ``X`` ``[m, d]``."""
        return self.mean_fn(self.check_inputs(X))

    def noise_std(self, X) -> np.ndarray:
        """Standard deviation ``[m]`` of the Gaussian noise at ``X`` ``[m, d]``."""
        return self.noise_fn(self.check_inputs(X))

    def sample(self, X, rng: np.random.Generator) -> np.ndarray:
        """Noisy outputs ``[m]``: ``mean(X) + noise_std(X) * N(0, 1)``."""
        X = self.check_inputs(X)
        return self.mean(X) + self.noise_std(X) * rng.standard_normal(len(X))

    def check_inputs(self, X) -> np.ndarray:
        """``X`` as a float ``[m, d]`` array; ValueError for any other shape."""
        X = np.asarray(X, dtype=float)
        if X.ndim == 1:
            # a vector is m points of a 1-D simulator, or one point of a d-D one
            X = X.reshape(-1, 1) if self.dim == 1 else X.reshape(1, -1)
        if X.ndim != 2 or X.shape[1] != self.dim:
            raise ValueError(f"{self.name} takes inputs of shape [m, {self.dim}], got {X.shape}")
        return X


def _constant(sd: float) -> Callable[[np.ndarray], np.ndarray]:
    return lambda X: np.full(len(X), sd)


def gramacy1d_mean(X: np.ndarray) -> np.ndarray:
    """``sin(10 pi x) / (2 x) + (x - 1)^4``; ``X`` ``[m, 1]``."""
    x = X[:, 0]
    return np.sin(10 * np.pi * x) / (2 * x) + (x - 1) ** 4


def higdon_mean(X: np.ndarray) -> np.ndarray:
    """``sin(pi x / 5) + 0.2 cos(4 pi x / 5)`` for ``x < 10``, ``x / 10 - 1`` otherwise."""
    x = X[:, 0]
    wavy = np.sin(np.pi * x / 5) + 0.2 * np.cos(4 * np.pi * x / 5)
    return np.where(x < 10, wavy, x / 10 - 1)


def gramacy2d_mean(X: np.ndarray) -> np.ndarray:
    """``x1 exp(-x1^2 - x2^2)``; ``X`` ``[m, 2]``."""
    x1, x2 = X[:, 0], X[:, 1]
    return x1 * np.exp(-(x1**2) - x2**2)


def branin_mean(X: np.ndarray) -> np.ndarray:
    """Branin-Hoo with Forrester et al.'s extra ``+ 5 x1`` term (one global minimum)."""
    x1, x2 = X[:, 0], X[:, 1]
    b, c, r, s, t = 5.1 / (4 * np.pi**2), 5 / np.pi, 6.0, 10.0, 1 / (8 * np.pi)
    return (x2 - b * x1**2 + c * x1 - r) ** 2 + s * (1 - t) * np.cos(x1) + s + 5 * x1


def ishigami_mean(X: np.ndarray, a: float = 7.0, b: float = 0.1) -> np.ndarray:
    """``sin x1 + a sin^2 x2 + b x3^4 sin x1``; ``X`` ``[m, 3]``."""
    x1, x2, x3 = X[:, 0], X[:, 1], X[:, 2]
    return np.sin(x1) + a * np.sin(x2) ** 2 + b * x3**4 * np.sin(x1)


_HARTMANN_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])
_HARTMANN_A = np.array(
    [
        [10, 3, 17, 3.5, 1.7, 8],
        [0.05, 10, 17, 0.1, 8, 14],
        [3, 3.5, 1.7, 10, 17, 8],
        [17, 8, 0.05, 10, 0.1, 14],
    ]
)
_HARTMANN_P = 1e-4 * np.array(
    [
        [1312, 1696, 5569, 124, 8283, 5886],
        [2329, 4135, 8307, 3736, 1004, 9991],
        [2348, 1451, 3522, 2883, 3047, 6650],
        [4047, 8828, 8732, 5743, 1091, 381],
    ]
)


def hartmann6_mean(X: np.ndarray) -> np.ndarray:
    """``-sum_i alpha_i exp(-sum_j A_ij (x_j - P_ij)^2)``; ``X`` ``[m, 6]``."""
    inner = (_HARTMANN_A * (X[:, None, :] - _HARTMANN_P) ** 2).sum(-1)  # [m, 4]
    return -(_HARTMANN_ALPHA * np.exp(-inner)).sum(-1)


@cache
def motorcycle_table() -> dict[str, np.ndarray]:
    """The appendix's table: ``x`` ``[101]`` (0..100), ``mean`` ``[101]``, ``stddev`` ``[101]``."""
    text = resources.files("fbgp_al.clients").joinpath("data/motorcycle.json").read_text()
    raw = json.loads(text)
    return {key: np.asarray(raw[key], dtype=float) for key in ("x", "mean", "stddev")}


def _motorcycle(column: str) -> Callable[[np.ndarray], np.ndarray]:
    def lookup(X: np.ndarray) -> np.ndarray:
        x = X[:, 0]
        if np.any((x < 0) | (x > 100)):
            raise ValueError("motorcycle is defined on [0, 100]")
        table = motorcycle_table()
        # exact on the 101 integer inputs (the paper's pool); linear in between so that a value
        # such as 7.000000000000001 from the unit-cube round trip still reads its own row
        return np.interp(x, table["x"], table[column])

    return lookup


def _build() -> dict[str, Simulator]:
    pi = float(np.pi)
    return {
        s.name: s
        for s in (
            Simulator("gramacy1d", ((0.5, 2.5),), 101, gramacy1d_mean, _constant(0.1)),
            Simulator("higdon", ((0.0, 20.0),), 101, higdon_mean, _constant(0.1)),
            Simulator("gramacy2d", ((-2.0, 6.0),) * 2, 100, gramacy2d_mean, _constant(0.05)),
            Simulator("branin", ((-5.0, 10.0), (0.0, 15.0)), 100, branin_mean, _constant(11.32)),
            Simulator("ishigami", ((-pi, pi),) * 3, 100, ishigami_mean, _constant(0.187)),
            Simulator("hartmann6", ((0.0, 1.0),) * 6, 100, hartmann6_mean, _constant(0.0192)),
            Simulator(
                "motorcycle", ((0.0, 100.0),), 101, _motorcycle("mean"), _motorcycle("stddev")
            ),
        )
    }


@dataclass(frozen=True)
class MultiSimulator(Simulator):
    """A simulator of several named outputs on one box: ``outputs`` holds each one's
    ``(name, mean_fn, noise_fn)``; ``mean_fn`` and ``noise_fn`` are output 0's, so that
    single-output tooling sees output 0. For a multi-output campaign (its ``outputs``)."""

    outputs: tuple[tuple[str, Callable, Callable], ...] = ()

    @property
    def output_names(self) -> list[str]:
        return [name for name, _, _ in self.outputs]

    def campaign_outputs(self) -> list[dict]:
        """The campaign body's ``outputs``: ``[{"name": ..}, ..]``."""
        return [{"name": name} for name in self.output_names]

    def means(self, X) -> dict[str, np.ndarray]:
        """Each output's noise-free values ``[m]`` at ``X`` ``[m, d]``, by name."""
        X = self.check_inputs(X)
        return {name: mean(X) for name, mean, _ in self.outputs}

    def noise_stds(self, X) -> dict[str, np.ndarray]:
        """Each output's noise standard deviation ``[m]`` at ``X``, by name."""
        X = self.check_inputs(X)
        return {name: noise(X) for name, _, noise in self.outputs}

    def sample_outputs(self, X, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Noisy values ``[m]`` of each output, by name (independent noise per output)."""
        X = self.check_inputs(X)
        return {
            name: mean(X) + noise(X) * rng.standard_normal(len(X))
            for name, mean, noise in self.outputs
        }

    def label(self, x, rng: np.random.Generator, known_noise: bool = False) -> dict:
        """One point's label as ``run_simulator``'s ``f`` returns it: ``{name: y}``, or with
        ``known_noise`` ``{"y": {name: y}, "noise": {name: variance}}``."""
        X = self.check_inputs([list(x)])
        y = {name: float(v[0]) for name, v in self.sample_outputs(X, rng).items()}
        if not known_noise:
            return y
        return {"y": y, "noise": {name: float(v[0]) ** 2 for name, v in self.noise_stds(X).items()}}


def wave_mean(X: np.ndarray) -> np.ndarray:
    """A second output on Branin's box, of another scale: ``0.01 sin(x1 / 2) cos(x2 / 3)``."""
    return 0.01 * np.sin(X[:, 0] / 2) * np.cos(X[:, 1] / 3)


def wave_noise(X: np.ndarray) -> np.ndarray:
    """Heteroscedastic: ``0.0005 (1 + (x1 + 5) / 15)``, twice as large at ``x1 = 10``."""
    return 0.0005 * (1 + (X[:, 0] + 5) / 15)


def _build_multi() -> dict[str, MultiSimulator]:
    branin = ("branin", branin_mean, _constant(11.32))
    return {
        "branin2": MultiSimulator(
            "branin2",
            ((-5.0, 10.0), (0.0, 15.0)),
            100,
            branin_mean,
            _constant(11.32),
            outputs=(branin, ("wave", wave_mean, wave_noise)),
        ),
    }


_SIMULATORS = _build()
SIMULATORS: tuple[str, ...] = tuple(_SIMULATORS)
_MULTI = _build_multi()
# simulators of several outputs (for multi-output campaigns; not among the paper's benchmarks)
MULTI_SIMULATORS: tuple[str, ...] = tuple(_MULTI)


def get_simulator(name: str) -> Simulator:
    """The built-in simulator called ``name`` (one of :data:`SIMULATORS`, or of
    :data:`MULTI_SIMULATORS`: a :class:`MultiSimulator`)."""
    try:
        return _SIMULATORS[name] if name in _SIMULATORS else _MULTI[name]
    except KeyError:
        known = ", ".join(SIMULATORS + MULTI_SIMULATORS)
        raise KeyError(f"unknown simulator {name!r}; known: {known}") from None
