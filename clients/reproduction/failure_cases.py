"""The cases of ``fbgp-al bench-failures`` (:mod:`clients.reproduction.failure_regions`): a
simulator and the box of its pool coordinates (the unit cube) where its runs fail.

A case is named ``SIMULATOR`` (the box around the steepest point of the simulator's mean,
:func:`clients.reproduction.failure_regions.region`) or ``SIMULATOR-WHERE`` with ``WHERE`` one
of ``corner`` (a cube at the vertex of the box nearest the steepest point) and ``face`` (a slab
along the face nearest it, across the input where it lies nearest a bound): the acquisitions
favour the faces and corners of the box, so a region there is met early and often. ``mixed``
is a simulator of mixed inputs, a float, an int, a choice of three and a float (the beam of
docs/benchmarks.md, "Failure model in the campaign", with a fourth input), whose runs fail in
the corner where its output is steepest: thin and loaded, for two of its three materials, at
the upper end of its fourth input.

Every region covers about ``fraction`` of the pool: its share of the pool's grid points
(counted exactly where the grid has at most 10^6 points, else the box's volume), which is what
random sampling of the pool would lose per run.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

MATERIALS = ("steel", "aluminium", "titanium")
MODULUS = {"steel": 200.0, "aluminium": 70.0, "titanium": 110.0}
WHERES = ("corner", "face")
GRID_COUNT_LIMIT = 1_000_000


@dataclass(frozen=True)
class MixedBeam:
    """A cantilever's tip deflection, on a log10 scale and in arbitrary units, under ``load``
    (float, 1 to 10), ``thickness`` (int, 2 to 12), ``material`` (a choice of three, of moduli
    ``E`` 200, 70 and 110) and ``length`` (float, 0.5 to 1.5): ``log10(4 load length^3 / (E
    thickness^3))``, with Gaussian noise of sd 0.02. The face of
    :class:`clients.simulators.Simulator` that the benchmark uses: values in, pool coordinates
    out, and back, snapped to the grid."""

    name: str = "mixed"
    points_per_dim: int = 11
    noise: float = 0.02
    dim: int = 4

    def inputs(self) -> list[dict]:
        return [
            {"name": "load", "lower": 1.0, "upper": 10.0},
            {"name": "thickness", "type": "int", "lower": 2, "upper": 12},
            {"name": "material", "type": "choice", "values": list(MATERIALS)},
            {"name": "length", "lower": 0.5, "upper": 1.5},
        ]

    @property
    def pool(self) -> dict:
        return {"type": "grid", "points_per_dim": self.points_per_dim}

    def axes(self) -> list[np.ndarray]:
        """The grid's pool coordinates per input."""
        k = self.points_per_dim
        return [
            np.linspace(0, 1, k),
            np.linspace(0, 1, 11),
            np.linspace(0, 1, 3),
            np.linspace(0, 1, k),
        ]

    def snap(self, U) -> np.ndarray:
        """Pool coordinates of the grid points nearest to ``U`` (``m x 4``)."""
        U = np.atleast_2d(np.asarray(U, dtype=float))
        return np.stack(
            [a[np.abs(U[:, j, None] - a).argmin(1)] for j, a in enumerate(self.axes())], axis=1
        )

    def to_unit(self, X) -> np.ndarray:
        """Points (``[load, thickness, material, length]`` rows) -> pool coordinates."""
        rows = [list(x) for x in X]
        return np.array(
            [
                [
                    (float(x[0]) - 1.0) / 9.0,
                    (int(x[1]) - 2) / 10.0,
                    MATERIALS.index(x[2]) / 2.0,
                    float(x[3]) - 0.5,
                ]
                for x in rows
            ],
            dtype=float,
        ).reshape(len(rows), 4)

    def from_unit(self, U) -> np.ndarray:
        """Pool coordinates -> points (an object array of rows), snapped to the grid."""
        U = self.snap(U)
        out = np.empty((len(U), 4), dtype=object)
        out[:, 0] = [float(round(1.0 + 9.0 * v, 10)) for v in U[:, 0]]
        out[:, 1] = [int(round(2 + 10 * v)) for v in U[:, 1]]
        out[:, 2] = [MATERIALS[int(round(2 * v))] for v in U[:, 2]]
        out[:, 3] = [float(round(0.5 + v, 10)) for v in U[:, 3]]
        return out

    def mean(self, X) -> np.ndarray:
        rows = [list(x) for x in X]
        return np.log10(
            [4.0 * float(x[0]) * float(x[3]) ** 3 / (MODULUS[x[2]] * int(x[1]) ** 3) for x in rows]
        )

    def sample(self, X, rng: np.random.Generator) -> np.ndarray:
        mean = self.mean(X)
        return mean + self.noise * rng.standard_normal(len(mean))

    def grid(self) -> np.ndarray:
        """Every grid point's pool coordinates."""
        return np.array(list(itertools.product(*self.axes())), dtype=float)


def pool_share(sim, lower: np.ndarray, upper: np.ndarray) -> float:
    """The share of ``sim``'s pool grid inside the box ``[lower, upper]``: counted per input
    (the grid is a product), exact; the box's volume where a grid has more than
    ``GRID_COUNT_LIMIT`` points or no known axes."""
    axes = sim.axes() if hasattr(sim, "axes") else None
    if axes is None:
        k = int(sim.points_per_dim)
        if k**sim.dim > GRID_COUNT_LIMIT:
            return float(np.prod(np.asarray(upper) - np.asarray(lower)))
        axes = [np.linspace(0, 1, k)] * sim.dim
    eps = 1e-12
    return float(
        np.prod(
            [
                np.mean((a >= lo - eps) & (a <= hi + eps))
                for a, lo, hi in zip(axes, lower, upper, strict=True)
            ]
        )
    )


def corner(centre: np.ndarray, fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """A cube of volume ``fraction`` at the vertex of the unit cube nearest ``centre``."""
    side = fraction ** (1.0 / len(centre))
    high = np.asarray(centre) >= 0.5
    return np.where(high, 1.0 - side, 0.0), np.where(high, 1.0, side)


def face(centre: np.ndarray, fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """A slab of volume ``fraction`` along the face nearest ``centre``: across the input where
    ``centre`` lies nearest a bound, all of every other input."""
    centre = np.asarray(centre, dtype=float)
    j = int(np.argmin(np.minimum(centre, 1.0 - centre)))
    lower, upper = np.zeros(len(centre)), np.ones(len(centre))
    if centre[j] >= 0.5:
        lower[j] = 1.0 - fraction
    else:
        upper[j] = fraction
    return lower, upper


def mixed_region() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The mixed beam's failing corner in pool coordinates (centre, lower, upper), its bounds
    half-way between grid levels: ``load`` >= 4.6, ``thickness`` <= 8, material steel or
    aluminium, ``length`` >= 1.0 (7 x 7 x 2 x 6 of the 11 x 11 x 3 x 11 grid points, 14.7%)."""
    lower, upper = np.array([0.35, 0.0, 0.0, 0.45]), np.array([1.0, 0.65, 0.75, 1.0])
    return np.array([1.0, 0.0, 0.0, 1.0]), lower, upper
