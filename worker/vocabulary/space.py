"""A campaign's input space (numpy only): each input's values, the pool's coordinates in the unit
cube, and the features the GP sees.

An input is ``{"name", "lower", "upper"}`` (a float; ``"type": "float"`` implied), ``{"name",
"type": "int", "lower", "upper"}`` (integers from ``lower`` to ``upper``), ``{"name", "type":
"log", "lower", "upper"}`` (``0 < lower``: a float spread evenly on the log scale) or ``{"name",
"type": "choice", "values": [...]}`` (one of ``k >= 2`` values, strings or numbers).

Three representations of a point, per input:

- its value ``x`` (what a user sends and reads: a number, an integer, or a choice's value);
- its code (a float64: the value itself, or a choice's index in ``values``), which is how an
  explicit pool's points are stored;
- its pool coordinate ``v`` in ``[0, 1]``: ``(x - lower) / (upper - lower)`` for a float or an
  int, ``(log x - log lower) / (log upper - log lower)`` for a log input, ``index / (k - 1)``
  for a choice. A value maps back by snapping: an int to the nearest integer, a choice to the
  nearest index.

The GP's features of ``v``: ``v`` itself for a float, int or log input; for a choice, a one-hot
block of ``k`` features (each with its own ARD lengthscale). A campaign of plain float inputs
has ``features == v``: its GP sees the unit cube of the declared bounds' scaling.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np

TYPES = ("float", "int", "log", "choice")


def decimal(code, digits: int = 15) -> np.ndarray:
    """Values from pool coordinates (``lower + v (upper - lower)``) rounded to ``digits``
    significant digits: the rounding of that product and sum (a few units in the last place)
    gone, so that a grid's level 4.325 is handed out as ``4.325``, not ``4.324999999999999``
    (a value of more digits moves by less than one part in 1e15)."""
    return np.array([float(f"{c:.{digits}g}") for c in np.ravel(code)]).reshape(np.shape(code))


def _snap(t: np.ndarray) -> np.ndarray:
    """The nearest integer, halves rounded up (monotone: distinct levels at least 1 apart stay
    distinct, which ``np.rint``'s halves-to-even does not guarantee)."""
    return np.floor(t + 0.5)


def by_name(x, names: list[str]):
    """Points ``x`` with those given as mappings of the inputs' ``names`` to values put in the
    inputs' order (the others as they are); ValueError naming the point for a mapping that
    lacks an input or names one that is not among ``names``."""
    if not any(isinstance(point, Mapping) for point in x):
        return x
    out = []
    for k, point in enumerate(x):
        if isinstance(point, Mapping):
            missing = [name for name in names if name not in point]
            unknown = [str(key) for key in point if key not in names]
            if missing or unknown:
                said = [f"lacks {', '.join(missing)}"] if missing else []
                said += [f"names no input of the campaign: {', '.join(unknown)}"] if unknown else []
                raise ValueError(f"point {k} {'; '.join(said)} (inputs: {', '.join(names)})")
            point = [point[name] for name in names]
        out.append(point)
    return out


@dataclass(frozen=True)
class Input:
    """One input: its ``name``, ``type``, bounds (``lower``, ``upper``; None for a choice) and a
    choice's ``values``."""

    name: str
    type: str = "float"
    lower: float | None = None
    upper: float | None = None
    values: tuple = ()

    def __post_init__(self):
        if self.type not in TYPES:
            raise ValueError(f"input {self.name!r}: unknown type {self.type!r}")
        if self.type == "choice":
            if len(self.values) < 2:
                raise ValueError(f"input {self.name!r}: a choice needs 2 values or more")
        elif not (self.lower is not None and self.upper is not None and self.lower < self.upper):
            raise ValueError(f"input {self.name!r}: lower must be below upper")
        if self.type == "log" and self.lower <= 0:
            raise ValueError(f"input {self.name!r}: a log input needs lower > 0")

    @classmethod
    def of(cls, spec: dict) -> Input:
        kind = spec.get("type") or "float"
        if kind == "choice":
            return cls(spec["name"], kind, values=tuple(spec["values"]))
        return cls(spec["name"], kind, float(spec["lower"]), float(spec["upper"]))

    def spec(self) -> dict:
        """The input as a campaign body declares it."""
        if self.type == "choice":
            return {"name": self.name, "type": "choice", "values": list(self.values)}
        if self.type == "int":
            return {
                "name": self.name,
                "type": "int",
                "lower": int(self.lower),
                "upper": int(self.upper),
            }
        out = {"name": self.name, "lower": self.lower, "upper": self.upper}
        return out if self.type == "float" else dict(out, type=self.type)

    @property
    def k(self) -> int:
        """A choice's number of values."""
        return len(self.values)

    @property
    def n_features(self) -> int:
        return self.k if self.type == "choice" else 1

    @property
    def feature_names(self) -> list[str]:
        if self.type == "choice":
            return [f"{self.name}={v}" for v in self.values]
        return [self.name]

    def levels(self, points_per_dim: int) -> int:
        """The grid's number of distinct values of this input: ``points_per_dim`` for a float or
        log input, at most every integer of an int one, every value of a choice."""
        if self.type == "choice":
            return self.k
        if self.type == "int":
            return int(min(points_per_dim, int(self.upper) - int(self.lower) + 1))
        return int(points_per_dim)

    def axis(self, points_per_dim: int) -> np.ndarray:
        """The grid's pool coordinates of this input, ascending and distinct: ``j / (L - 1)``,
        an int input's snapped to its integers."""
        levels = self.levels(points_per_dim)
        v = np.arange(levels) / (levels - 1)
        return self.snap(v) if self.type == "int" else v

    # -- value <-> code ----------------------------------------------------------------------
    @cached_property
    def _index(self) -> dict:
        """A choice's value -> its index (a number matches an equal number: 1 and 1.0)."""
        return {v: float(j) for j, v in enumerate(self.values)}

    def code(self, value, check: bool = True) -> float:
        """A value's code; ValueError (naming the input) if it is not one of the input's
        (``check=False``: a number is taken as it is, even outside the bounds, as a stored
        label's may be a hair after rounding, or a point a model extrapolates to; a log
        input's still must be positive)."""
        if self.type == "choice":
            if not isinstance(value, bool) and isinstance(value, (str, int, float)):
                index = self._index.get(value)
                if index is not None:
                    return index
            raise ValueError(
                f"{self.name} = {value!r} is not one of its values {list(self.values)!r}"
            )
        if isinstance(value, (str, bool)):
            raise ValueError(f"{self.name} = {value!r} is not a number")
        try:
            number = float(value)
        except (TypeError, OverflowError):
            raise ValueError(f"{self.name} = {value!r} is not a finite number") from None
        if not math.isfinite(number):
            raise ValueError(f"{self.name} = {value!r} is not a finite number")
        if not check:
            if self.type == "log" and not number > 0:
                raise ValueError(f"{self.name} = {value!r} is not positive (a log input)")
            return number
        if not self.lower <= number <= self.upper:
            raise ValueError(f"{self.name} = {value!r} is outside [{self.lower:g}, {self.upper:g}]")
        if self.type == "int" and number != math.floor(number):
            raise ValueError(f"{self.name} = {value!r} is not an integer (an int input)")
        return number

    def value(self, code: float):
        """The value of a code: a float, an int, or a choice's value as declared."""
        if self.type == "choice":
            return self.values[int(code)]
        if self.type == "int":
            return int(code)
        return float(code)

    # -- code <-> pool coordinate ------------------------------------------------------------
    def to_pool(self, code: np.ndarray) -> np.ndarray:
        if self.type == "choice":
            return code / (self.k - 1)
        if self.type == "log":
            lo, hi = math.log(self.lower), math.log(self.upper)
            return (np.log(code) - lo) / (hi - lo)
        return (code - self.lower) / (self.upper - self.lower)

    def from_pool(self, v: np.ndarray) -> np.ndarray:
        """The code nearest to pool coordinate ``v`` (clipped to ``[0, 1]``, snapped)."""
        if self.type == "choice":
            return _snap(np.clip(v, 0, 1) * (self.k - 1))
        if self.type == "log":
            lo, hi = math.log(self.lower), math.log(self.upper)
            code = np.exp(lo + v * (hi - lo))
            # 12 significant digits: a grid's decades read 1e-05, not 1.0000000000000002e-05
            code = np.clip(decimal(code, 12), self.lower, self.upper)
            return np.where(v <= 0, self.lower, np.where(v >= 1, self.upper, code))
        if self.type == "int":
            return np.clip(
                _snap(self.lower + np.clip(v, 0, 1) * (self.upper - self.lower)),
                self.lower,
                self.upper,
            )
        return decimal(self.lower + v * (self.upper - self.lower))

    def snap(self, v: np.ndarray) -> np.ndarray:
        """The pool coordinate of the admissible value nearest to ``v``."""
        if self.type in ("int", "choice"):
            return self.to_pool(self.from_pool(v))
        return v

    def stratify(self, u: np.ndarray) -> np.ndarray:
        """A uniform ``u`` in [0, 1] as the pool coordinate of a value drawn with equal
        probability, for a choice or an int input (``u`` in the j-th of k equal bins: the j-th
        value); ``u`` itself for a float or log input. Snapping ``u`` to the nearest value
        instead would give the first and last values half the others' share."""
        if self.type == "choice":
            return np.minimum(np.floor(u * self.k), self.k - 1) / (self.k - 1)
        if self.type == "int":
            count = self.upper - self.lower + 1
            return np.minimum(np.floor(u * count), count - 1) / (count - 1)
        return u

    def features(self, v: np.ndarray) -> np.ndarray:
        """``m x n_features``: ``v`` itself, or a choice's one-hot block."""
        if self.type != "choice":
            return v[:, None]
        index = _snap(np.clip(v, 0, 1) * (self.k - 1)).astype(np.int64)
        return np.eye(self.k)[index]


@dataclass(frozen=True)
class Space:
    """A campaign's inputs, in order."""

    inputs: tuple[Input, ...]

    @classmethod
    def of(cls, inputs: list[dict]) -> Space:
        """The space of a campaign body's ``inputs``."""
        return cls(tuple(Input.of(i) for i in inputs))

    @property
    def dim(self) -> int:
        return len(self.inputs)

    @property
    def typed(self) -> bool:
        """Whether any input is not a plain float."""
        return any(i.type != "float" for i in self.inputs)

    @property
    def numeric(self) -> bool:
        """Whether every value is a number (no choice input)."""
        return all(i.type != "choice" for i in self.inputs)

    @property
    def n_features(self) -> int:
        return sum(i.n_features for i in self.inputs)

    @property
    def feature_names(self) -> list[str]:
        """The GP's features in order (the columns of the model's lengthscales)."""
        return [name for i in self.inputs for name in i.feature_names]

    @property
    def one_hot(self) -> np.ndarray:
        """Which of the GP's features are a choice input's one-hot columns."""
        return np.array([i.type == "choice" for i in self.inputs for _ in range(i.n_features)])

    def transform(self) -> dict:
        """The model body's input transform: each input's ``lower`` and ``upper`` (a choice's
        first and last index, 0 and ``k - 1``), and, where an input is typed, the ``inputs``
        themselves (as a campaign body declares them)."""
        out = {
            "lower": [0.0 if i.type == "choice" else i.lower for i in self.inputs],
            "upper": [float(i.k - 1) if i.type == "choice" else i.upper for i in self.inputs],
        }
        if self.typed:
            out["inputs"] = [i.spec() for i in self.inputs]
        return out

    # -- values <-> codes --------------------------------------------------------------------
    def codes(self, x, check: bool = True) -> np.ndarray:
        """Points ``x`` (``m`` lists of ``d`` values, or mappings of the inputs' names to
        values) as an ``m x d`` float64 array of codes; ValueError (naming the point and the
        input) for a value that is not the input's, or a mapping that lacks an input or names
        one the campaign does not have (``check=False``: numbers are not held to their bounds,
        :meth:`Input.code`)."""
        if len(x) == 0:
            return np.empty((0, self.dim))
        x = by_name(x, [i.name for i in self.inputs])
        fast = self._numeric_codes(x, check)
        if fast is not None:
            return fast
        out = np.empty((len(x), self.dim))
        for k, point in enumerate(x):
            if len(point) != self.dim:
                raise ValueError(
                    f"point {k} has {len(point)} coordinates, the campaign has {self.dim} inputs"
                )
            for j, (value, spec) in enumerate(zip(point, self.inputs, strict=True)):
                try:
                    out[k, j] = spec.code(value, check)
                except ValueError as error:
                    raise ValueError(f"point {k}: {error}") from None
        return out

    def _numeric_codes(self, x, check: bool) -> np.ndarray | None:
        """Numeric points, checked at once as an array; None where that is not enough (a
        choice input, a coordinate that is no number, one that is out of place)."""
        if not self.numeric:
            return None
        try:
            a = np.asarray(x)
        except ValueError:  # ragged
            return None
        if a.dtype.kind not in "fi" or a.shape != (len(x), self.dim):
            return None
        a = a.astype(np.float64)
        logs = [j for j, i in enumerate(self.inputs) if i.type == "log"]
        if not (np.isfinite(a).all() and (a[:, logs] > 0).all()):
            return None  # each value looked at, to name the one at fault
        if not check:
            return a
        lower = np.array([i.lower for i in self.inputs])
        upper = np.array([i.upper for i in self.inputs])
        ok = (lower <= a).all() and (a <= upper).all()
        whole = [j for j, i in enumerate(self.inputs) if i.type == "int"]
        if ok and whole:
            ok = bool((np.floor(a[:, whole]) == a[:, whole]).all())
        return a if ok else None

    def values(self, codes) -> list[list]:
        """Codes (``m x d``) as points: lists of floats, ints and choice values."""
        codes = np.asarray(codes, dtype=np.float64)
        if not self.typed:
            return codes.tolist()
        columns = [[spec.value(c) for c in codes[:, j]] for j, spec in enumerate(self.inputs)]
        return [list(row) for row in zip(*columns, strict=True)] if columns else []

    def canonical(self, x) -> list[list]:
        """Points with each value as the input keeps it (floats, ints, a choice's declared
        value), after checking them (ValueError otherwise)."""
        return self.values(self.codes(x))

    # -- codes <-> pool coordinates ------------------------------------------------------------
    def code_to_pool(self, codes) -> np.ndarray:
        codes = np.asarray(codes, dtype=np.float64)
        if not self.typed:
            lower = np.array([i.lower for i in self.inputs])
            upper = np.array([i.upper for i in self.inputs])
            return (codes - lower) / (upper - lower)
        return _columns(codes, [i.to_pool for i in self.inputs])

    def pool_to_code(self, v) -> np.ndarray:
        v = np.asarray(v, dtype=np.float64)
        if not self.typed:
            lower = np.array([i.lower for i in self.inputs])
            upper = np.array([i.upper for i in self.inputs])
            return decimal(lower + v * (upper - lower))
        return _columns(v, [i.from_pool for i in self.inputs])

    def to_pool(self, x) -> np.ndarray:
        """Points (values, checked before) -> ``m x d`` pool coordinates in the unit cube."""
        return self.code_to_pool(self.codes(x, check=False))

    def from_pool(self, v) -> list[list]:
        """Pool coordinates -> points (values), each snapped to its input's nearest value."""
        return self.values(self.pool_to_code(v))

    def snap(self, v) -> np.ndarray:
        """Pool coordinates of the admissible points nearest to ``v``."""
        v = np.asarray(v, dtype=np.float64)
        return v if not self.typed else _columns(v, [i.snap for i in self.inputs])

    def stratify(self, u) -> np.ndarray:
        """Points ``u`` of the unit cube (a Latin hypercube) with each choice and int input's
        values equally likely (:meth:`Input.stratify`); unchanged for float and log inputs."""
        u = np.asarray(u, dtype=np.float64)
        if all(i.type in ("float", "log") for i in self.inputs):
            return u
        return _columns(u, [i.stratify for i in self.inputs])

    # -- pool coordinates -> GP features ---------------------------------------------------------
    def features(self, v) -> np.ndarray:
        """Pool coordinates (``m x d``) -> the GP's features (``m x n_features``)."""
        v = np.asarray(v, dtype=np.float64)
        if self.numeric:
            return v
        v = v.reshape(-1, self.dim)
        return np.concatenate([i.features(v[:, j]) for j, i in enumerate(self.inputs)], axis=1)

    def to_gp(self, x) -> np.ndarray:
        """Points (values) -> the GP's features."""
        return self.features(self.to_pool(x))

    # -- grids -----------------------------------------------------------------------------------
    def levels(self, points_per_dim: int) -> tuple[int, ...]:
        return tuple(i.levels(points_per_dim) for i in self.inputs)

    def grid_shape(self, points_per_dim: int) -> str:
        """A grid's levels as text: ``k^d`` when every input has ``k``, else ``k1 x k2 x ...``."""
        levels = self.levels(points_per_dim)
        if len(set(levels)) == 1:
            return f"{levels[0]}^{len(levels)}"
        return " x ".join(str(n) for n in levels)

    def grid_size(self, points_per_dim: int) -> int:
        return math.prod(self.levels(points_per_dim))

    def axes(self, points_per_dim: int) -> tuple[tuple[float, ...] | None, ...] | None:
        """A grid's pool coordinates per input (:class:`worker.vocabulary.design.GridPool`'s
        ``axes``): None for a float or log input, whose levels are the plain ``{0, 1/(k-1), ...,
        1}``; None in all for a campaign of float and log inputs."""
        if all(i.type in ("float", "log") for i in self.inputs):
            return None
        return tuple(
            None if i.type in ("float", "log") else tuple(i.axis(points_per_dim).tolist())
            for i in self.inputs
        )


def _columns(a: np.ndarray, maps) -> np.ndarray:
    a = a.reshape(-1, len(maps))
    return np.stack([f(a[:, j]) for j, f in enumerate(maps)], axis=1) if len(a) else a.copy()
