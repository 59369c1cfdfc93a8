"""The field types and base classes that the bodies of the API share: a number that must be
finite, text a user wrote (:mod:`service.names`), a point's coordinates, an output's value and
its noise variance (within the range where the GP's float64 arithmetic stays finite), and the
acquisitions' names (:mod:`worker.vocabulary.defaults`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt
from pydantic import Strict as StrictValue

from fbgp_al.service.names import visible
from fbgp_al.worker.vocabulary.defaults import ACQUISITIONS

Acquisition = Literal[ACQUISITIONS]  # type: ignore[valid-type]
# a number in JSON: an integer or a float, never a string or a boolean, and finite
Finite = Annotated[float, StrictValue(), Field(allow_inf_nan=False)]
MAX_TEXT = 200
# text a user wrote and people read: NFKC, nothing hidden (service.names)
Text = Annotated[str, Field(max_length=MAX_TEXT), AfterValidator(visible)]
# a choice input's value: a string or a number (an integer stays one)
ChoiceValue = Annotated[StrictInt, Field(ge=-(2**53), le=2**53)] | Finite | Text
# a point's coordinate: a number, or a choice input's value (checked per input by
# inputs.check_points); a campaign of float inputs reads and writes numbers only, as floats
Point = list[StrictInt | Finite | Text]
Value = int | float | str  # a coordinate as answered
# an output's largest magnitude: standardized in float64, its variances (y's scale squared)
# stay finite below it
MAX_ABS_Y = 1e150


def _within_range(y: float) -> float:
    if abs(y) > MAX_ABS_Y:
        raise ValueError(
            f"an output must lie within +-{MAX_ABS_Y:g} (larger magnitudes overflow "
            "the GP's float64 variances; rescale the output)"
        )
    return y


Output = Annotated[Finite, AfterValidator(_within_range)]
# a label's known noise variance: an output's scale squared at most
MAX_NOISE = MAX_ABS_Y**2


def _variance_in_range(v: float) -> float:
    if not 0 <= v <= MAX_NOISE:
        raise ValueError(
            f"a noise variance must lie within [0, {MAX_NOISE:g}] (the variance "
            f"of y in its units; a standard deviation of at most "
            f"{MAX_ABS_Y:g})"
        )
    return v


NoiseVariance = Annotated[Finite, AfterValidator(_variance_in_range)]


class Body(BaseModel):
    """A body of the API: each field's docstring is its description in the OpenAPI document."""

    model_config = ConfigDict(use_attribute_docstrings=True)


class Strict(Body):
    """A request body: no field beyond its own, and each of JSON's own type (no string taken
    for a number or a boolean, no number for a boolean, no float for an integer)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class Free(Body):
    """A body with these fields at least, and possibly more."""

    model_config = ConfigDict(extra="allow")
