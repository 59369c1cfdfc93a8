"""A campaign's inputs, its pool of candidate points and its initial design, as posted, and the
points a client sends, checked against the inputs (:class:`worker.vocabulary.space.Space`)."""

from __future__ import annotations

import math
from typing import Annotated, Literal, Required

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from typing_extensions import TypedDict

from fbgp_al.service.names import visible
from fbgp_al.service.schemas.fields import ChoiceValue, Finite, Point, Strict
from fbgp_al.worker.vocabulary.defaults import INITIAL_DESIGN_SIZE
from fbgp_al.worker.vocabulary.space import Space

MAX_POOL = 2**62  # pool indices are 64-bit integers
MAX_INT_BOUND = 2**53  # an int input's bounds, exact in float64
MAX_VALUES = 100  # of a choice input: each is a feature of the GP, with a lengthscale of its own


class DeclaredInput(TypedDict, total=False):
    """An input as declared (a float's without ``type``, a choice's without bounds)."""

    __pydantic_config__ = ConfigDict(use_attribute_docstrings=True)

    name: Required[str]
    """The input's name."""
    type: Literal["int", "log", "choice"]
    """`int`, `log` or `choice`; absent for a float input."""
    lower: int | float
    """The smallest value (not for a choice)."""
    upper: int | float
    """The largest value (not for a choice)."""
    values: list[int | float | str]
    """A choice's values."""


NARROWEST = 1e-12  # an input's narrowest range, relative to its bounds (4,500 doubles or so)


def check_distinguishable(spec: InputSpec) -> None:
    """ValueError unless a new campaign's input tells its values apart: a float or log range
    wider than :data:`NARROWEST` of its bounds' size (in log space for a log input), a choice
    whose values differ as text too (as the CSV export and the model's features write them).
    Checked at creation only, so that campaigns created before still answer."""
    name = spec.name
    if spec.type == "choice":
        texts = [str(v) for v in spec.values]
        if len(set(texts)) != len(texts):
            same = [v for v in spec.values if texts.count(str(v)) > 1]
            raise ValueError(
                f"input {name!r}: its values {same[0]!r} and {same[1]!r} read "
                "the same as text (in the CSV export and the model's features); "
                "make them distinct as text"
            )
        return
    if spec.type == "int":  # distinct integers within +-2^53: exact
        return
    if spec.type == "log":
        lo, hi, floor = math.log(spec.lower), math.log(spec.upper), 1.0
    else:
        lo, hi, floor = spec.lower, spec.upper, 1e-300
    if not hi - lo > NARROWEST * max(abs(lo), abs(hi), floor):
        scale = "log(upper) - log(lower)" if spec.type == "log" else "upper - lower"
        raise ValueError(
            f"input {name!r}: its range is too narrow to tell points apart in "
            f"float64 ({scale} must exceed {NARROWEST:g} of the bounds' size; "
            "rescale the input)"
        )


class InputSpec(Strict):
    """An input: ``{name, lower, upper}`` (a float), with ``"type": "int"`` (integral bounds) or
    ``"type": "log"`` (``lower > 0``), or ``{name, "type": "choice", "values": [...]}``."""

    name: Annotated[str, AfterValidator(visible)] = Field(min_length=1, max_length=100)
    """The input's name, used in `{name}` placeholders of `fbgp-al run` and in the CSV export
    (stored in Unicode's NFKC form; no invisible or bidirectional characters, one script)."""
    type: Literal["float", "int", "log", "choice"] = "float"
    """`float` (any number between the bounds), `int` (the integers between integral bounds), `log`
    (a positive number, spread evenly on the log scale) or `choice` (one of `values`)."""
    lower: Finite | None = None
    """The smallest value, in the input's own units (float, int and log inputs; a log input's must
    be > 0)."""
    upper: Finite | None = None
    """The largest value, in the input's own units; above `lower`."""
    values: list[ChoiceValue] | None = Field(default=None, min_length=2, max_length=MAX_VALUES)
    """A choice input's values: 2 to 100 distinct strings or numbers (none for other types)."""

    @model_validator(mode="after")
    def _ordered(self):
        name = self.name
        if self.type == "choice":
            if self.lower is not None or self.upper is not None:
                raise ValueError(f"input {name!r}: a choice input has values, no lower or upper")
            if self.values is None:
                raise ValueError(f"input {name!r}: a choice input needs values (2 or more)")
            if len(set(self.values)) != len(self.values):
                raise ValueError(f"input {name!r}: its values must be distinct")
            return self
        if self.values is not None:
            raise ValueError(
                f'input {name!r}: values are for a choice input only ("type": "choice")'
            )
        if self.lower is None or self.upper is None:
            raise ValueError(f"input {name!r}: a {self.type} input needs lower and upper")
        if not self.lower < self.upper:
            raise ValueError(
                f"input {name!r}: lower ({self.lower}) must be below upper ({self.upper})"
            )
        if not math.isfinite(self.upper - self.lower):
            raise ValueError(
                f"input {name!r}: its range, upper - lower, overflows a float "
                f"({self.lower} to {self.upper})"
            )
        if self.type == "int":
            for bound in (self.lower, self.upper):
                if bound != math.floor(bound) or abs(bound) > MAX_INT_BOUND:
                    raise ValueError(
                        f"input {name!r}: an int input's bounds must be integers "
                        f"within +-2^53, not {bound}"
                    )
        if self.type == "log" and not self.lower > 0:
            raise ValueError(f"input {name!r}: a log input needs lower > 0, not {self.lower}")
        return self

    @model_serializer(mode="wrap", return_type=DeclaredInput)
    def _declared(self, handler: SerializerFunctionWrapHandler) -> dict:
        """As declared: a float input as ``{name, lower, upper}``; an int's bounds as integers;
        a choice without bounds."""
        out = {k: v for k, v in handler(self).items() if v is not None}
        if self.type == "float":
            out.pop("type", None)
        elif self.type == "int":
            out.update(lower=int(self.lower), upper=int(self.upper))
        return out


class GridPoolSpec(Strict):
    """A grid pool, never built in memory: `points_per_dim` levels of each float or log input (a
    log input's evenly spaced on the log scale), `min(points_per_dim, upper - lower + 1)`
    integers of an int input, every value of a choice. A float level is handed out as its
    shortest decimal (15 significant digits: `4.325`, not `4.324999999999999`)."""

    type: Literal["grid"]
    """`grid`."""
    points_per_dim: int = Field(ge=2, le=100_000)
    """Levels per float or log input (and at most this many integers per int input)."""


class PointsPoolSpec(Strict):
    """An explicit pool: the points that may be run, each a list of the inputs' values in order."""

    type: Literal["points"]
    """`points`."""
    points: list[Point] = Field(min_length=1, max_length=1_000_000)
    """The pool's points (distinct), each with one value per input, in the inputs' order."""


class ContinuousPoolSpec(Strict):
    """A pool that is the box: no stored candidates; each refit scores `pool_subsample` fresh
    scrambled Sobol points of the box (seeded by the campaign's seed and its number of labels;
    each int and choice input's values equally likely, none outside the constraints) and
    polishes the best (`search`; `"search": {"polish": false}` keeps the best of the sample).
    The initial design is a maximin Latin hypercube snapped to a Sobol sample of the box. Every
    point handed out after it is a point of the box, stored as it is run. Needs a float or log
    input."""

    type: Literal["continuous"]
    """`continuous`."""


class InitialDesign(Strict):
    """The first labels: a maximin Latin hypercube snapped to the pool, before any model chooses."""

    type: Literal["maximin-lhs"] = "maximin-lhs"
    """`maximin-lhs`, the only design."""
    size: int = Field(default=INITIAL_DESIGN_SIZE, ge=1, le=1000)
    """Points of the initial design (at most `max_labels`)."""


def space_of(inputs: list[InputSpec] | list[dict]) -> Space:
    """The inputs' :class:`worker.vocabulary.space.Space`."""
    return Space.of([i if isinstance(i, dict) else i.model_dump() for i in inputs])


def canonical_points(points: list[list], space: Space, what: str) -> list[list]:
    """The points with each coordinate as its input keeps it, or ValueError naming the point,
    the input and what is wrong (``what``: how to name a point)."""
    for k, point in enumerate(points):
        if len(point) != space.dim:
            raise ValueError(
                f"{what} {k} has {len(point)} coordinates, the campaign has {space.dim} inputs"
            )
    try:
        return space.canonical(points)
    except ValueError as error:
        raise ValueError(f"{what} {str(error).removeprefix('point ')}") from None


def check_points(points: list[list], inputs: list[dict]) -> list[list]:
    """The points with each coordinate as its input keeps it (a float, an int, a choice's
    value); ValueError unless every point has the campaign's dimension and each value is one
    of its input's (a number within its bounds, an integer, one of a choice's values)."""
    return canonical_points(points, space_of(inputs), "point")
