"""The multi-fidelity literature's two-level test problems, each a cheap and an expensive
function of the same inputs (the expensive one the metamodel is for).

- ``forrester`` (1-D, Forrester et al. 2007): ``f(x) = (6x - 2)^2 sin(12x - 4)``, cheap
  ``0.5 f(x) + 10 (x - 0.5) - 5``, on ``[0, 1]``.
- ``currin`` (2-D, Currin et al. 1991; Xiong et al. 2013): the exponential function, cheap the
  mean of four copies shifted by 0.05 (the second input held at 0 or more), on ``[0, 1]^2``.
- ``park`` (4-D, Park 1991; Xiong et al. 2013): ``x1 / 2 (sqrt(1 + (x2 + x3^2) x4 / x1^2) -
  1) + (x1 + 3 x4) exp(1 + sin x3)`` (the literature's ``x3^2``), cheap ``(1 + sin(x1) / 10)
  f - 2 x1 + x2^2 + x3^2 + 0.5``, on ``[0.01, 1] x [0, 1]^3`` (``x1 = 0`` divides by zero).
- ``borehole`` (8-D, Morris et al. 1993; Xiong et al. 2013): the water flow through a borehole,
  cheap with ``5`` for ``2 pi`` and ``1.5`` for ``1`` in the denominator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Problem:
    """Two levels of one simulator: ``functions[0]`` cheap, ``functions[1]`` expensive, each of
    a point in the inputs' units (``m x d`` -> ``m``); ``lower`` and ``upper`` the box."""

    name: str
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    functions: tuple[Callable[[np.ndarray], np.ndarray], Callable[[np.ndarray], np.ndarray]]

    @property
    def dim(self) -> int:
        return len(self.lower)

    def from_unit(self, u) -> np.ndarray:
        lo, hi = np.asarray(self.lower), np.asarray(self.upper)
        return lo + np.atleast_2d(np.asarray(u, dtype=np.float64)) * (hi - lo)

    def at(self, u, level: int) -> np.ndarray:
        """The ``level``'s values at unit-cube points ``u`` (``m x d``)."""
        return self.functions[level](self.from_unit(u))


def forrester(x):
    x = x[:, 0]
    return (6 * x - 2) ** 2 * np.sin(12 * x - 4)


def forrester_cheap(x):
    return 0.5 * forrester(x) + 10 * (x[:, 0] - 0.5) - 5


def currin(x):
    x1, x2 = x[:, 0], x[:, 1]
    with np.errstate(divide="ignore"):
        factor = 1 - np.exp(-1 / (2 * x2))  # 1 at x2 = 0, its limit
    poly = (2300 * x1**3 + 1900 * x1**2 + 2092 * x1 + 60) / (
        100 * x1**3 + 500 * x1**2 + 4 * x1 + 20
    )
    return factor * poly


def currin_cheap(x):
    total = 0.0
    for dx in (0.05, -0.05):
        for dy in (0.05, -0.05):
            shifted = np.c_[x[:, 0] + dx, np.maximum(0.0, x[:, 1] + dy)]
            total = total + currin(shifted)
    return total / 4


def park(x):
    x1, x2, x3, x4 = x.T
    return x1 / 2 * (np.sqrt(1 + (x2 + x3**2) * x4 / x1**2) - 1) + (x1 + 3 * x4) * np.exp(
        1 + np.sin(x3)
    )


def park_cheap(x):
    x1, x2, x3, _ = x.T
    return (1 + np.sin(x1) / 10) * park(x) - 2 * x1 + x2**2 + x3**2 + 0.5


BOREHOLE_LOWER = (0.05, 100.0, 63070.0, 990.0, 63.1, 700.0, 1120.0, 9855.0)
BOREHOLE_UPPER = (0.15, 50000.0, 115600.0, 1110.0, 116.0, 820.0, 1680.0, 12045.0)


def _borehole(x, numerator: float, one: float):
    rw, r, tu, hu, tl, hl, length, kw = x.T
    log_ratio = np.log(r / rw)
    return (numerator * tu * (hu - hl)) / (
        log_ratio * (one + 2 * length * tu / (log_ratio * rw**2 * kw) + tu / tl)
    )


def borehole(x):
    return _borehole(x, 2 * np.pi, 1.0)


def borehole_cheap(x):
    return _borehole(x, 5.0, 1.5)


PROBLEMS = {
    p.name: p
    for p in (
        Problem("forrester", (0.0,), (1.0,), (forrester_cheap, forrester)),
        Problem("currin", (0.0, 0.0), (1.0, 1.0), (currin_cheap, currin)),
        Problem("park", (0.01, 0.0, 0.0, 0.0), (1.0, 1.0, 1.0, 1.0), (park_cheap, park)),
        Problem("borehole", BOREHOLE_LOWER, BOREHOLE_UPPER, (borehole_cheap, borehole)),
    )
}
