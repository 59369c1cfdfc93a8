"""The labeling loop's bodies: the point ``/next`` hands out (or why not yet), a label and its
answer, a ticket's failure, abandon and renewal, and labels imported and exported
(``/observations``; an import's body is also ``/evaluate``'s test set)."""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import AfterValidator, ConfigDict, Field, model_validator

from fbgp_al.service.names import plain_text
from fbgp_al.service.schemas.fields import (
    MAX_NOISE,
    Body,
    NoiseVariance,
    Output,
    Point,
    Strict,
    Value,
)
from fbgp_al.worker.vocabulary.defaults import MAX_OUTPUTS

# a label's values with several outputs: an object {name: value} (checked against the
# campaign's outputs); observations' values in a column, or each output's column by name
_OUTPUTS = Field(min_length=1, max_length=MAX_OUTPUTS)
_COLUMN = Field(min_length=1, max_length=100_000)
Replicates = Annotated[list[Output], Field(min_length=2, max_length=100_000)]
OutputValues = Annotated[dict[str, Output], _OUTPUTS]
OutputVariances = Annotated[dict[str, NoiseVariance], _OUTPUTS]
YColumn = Annotated[list[Output | OutputValues], _COLUMN]
YColumns = Annotated[dict[str, Annotated[list[Output], _COLUMN]], _OUTPUTS]
NoiseColumn = Annotated[list[NoiseVariance | OutputVariances], _COLUMN]
NoiseColumns = Annotated[dict[str, Annotated[list[NoiseVariance], _COLUMN]], _OUTPUTS]


class NextPoint(Body):
    """``GET /campaigns/{id}/next``: a point to label under ``ticket`` before ``expires_at``."""

    ticket: str
    """The ticket to label, fail, abandon or renew this point with."""
    x: list[Value]
    """The point to run: one value per input, in the inputs' order (a choice's value as itself)."""
    expires_at: float
    """When the ticket's lease ends, unix seconds (`/renew` extends it)."""
    model_version: int | None
    """The model that chose the point (`null`: the initial design)."""
    fidelity: str | None = None
    """In a campaign with fidelities: the level to run the point at (its name); absent
    otherwise."""


class NotYet(Body):
    """``/next``'s 202: no point can be given yet; ask again after ``retry_after`` seconds."""

    detail: str
    """Why no point can be given yet (a model is being fitted)."""
    retry_after: int
    """Seconds to wait before asking again (also the `Retry-After` header)."""


class LabelPost(Strict):
    """``POST .../label``: ``y``; in a campaign with known noise also its ``noise`` variance,
    or instead of both, ``y_replicates`` (runs at the same point: ``y`` their mean, ``noise``
    their sample variance over their count, the variance of that mean)."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"ticket": "7d1c0e2a9b3f4c65a8e0d1f2b3c4d5e6", "y": 17.3}]}
    )

    ticket: str = Field(min_length=1, max_length=100)
    """The ticket `/next` gave with the point."""
    # with several outputs, objects {name: ...} (checked against the campaign's outputs)
    y: Output | OutputValues | None = None
    """The simulator's output at the point: a number, or with several outputs `{name: value}`, in
    the output's units (|y| at most 1e150; > 0 for an output declared `"transform": "log"`)."""
    noise: NoiseVariance | OutputVariances | None = None
    """With known noise: the variance of `y`, in y's units squared (0 to 1e300), or `{name:
    variance}`."""
    y_replicates: Replicates | Annotated[dict[str, Replicates], _OUTPUTS] | None = None
    """With known noise, instead of `y` and `noise`: 2 or more runs at the point (`{name: [...]}`
    with several outputs); y is their mean and noise their sample variance over their count
    (each > 0 for an output declared `"transform": "log"`)."""
    fidelity: str | None = Field(default=None, min_length=1, max_length=100)
    """In a campaign with fidelities, optionally: the level the label is of, which must be
    the level `/next` gave with the ticket (a 422 otherwise)."""

    @model_validator(mode="after")
    def _one_y(self):
        if self.y_replicates is not None:
            if self.y is not None or self.noise is not None:
                raise ValueError(
                    "y_replicates give y (their mean) and noise (the variance of "
                    "that mean): send them without y and noise"
                )
            if isinstance(self.y_replicates, dict):
                moments = {k: replicate_moments(v) for k, v in self.y_replicates.items()}
                self.y = {k: m[0] for k, m in moments.items()}
                self.noise = {k: m[1] for k, m in moments.items()}
            else:
                self.y, self.noise = replicate_moments(self.y_replicates)
        elif self.y is None:
            raise ValueError("y is required (or y_replicates, two runs or more at the point)")
        return self


def replicate_moments(values: list[float]) -> tuple[float, float]:
    """``(mean, sample variance (ddof=1) / count)`` of replicates: a label and the variance of
    its mean. Scaled by the largest magnitude first, so that no square overflows."""
    count = len(values)
    scale = max(abs(v) for v in values) or 1.0
    scaled = [v / scale for v in values]
    mean = math.fsum(scaled) / count
    variance = math.fsum((v - mean) ** 2 for v in scaled) / (count - 1) / count
    return mean * scale, min(variance * scale * scale, MAX_NOISE)


class LabelAnswer(Body):
    """A label stored (201), or the same label again (200)."""

    ticket: str
    """The ticket labeled."""
    y: float | dict[str, float]
    """The label stored."""
    noise: float | dict[str, float] | None = None  # in a campaign with known noise
    """Its noise variance, in a campaign with known noise."""
    n_labeled: int
    """Labels the campaign has now."""


class TicketPost(Strict):
    """A ticket to report on."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"ticket": "7d1c0e2a9b3f4c65a8e0d1f2b3c4d5e6"}]}
    )

    ticket: str = Field(min_length=1, max_length=100)
    """The ticket `/next` gave with the point."""


class FailPost(TicketPost):
    """``POST .../fail``: the ticket's run failed, and why."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"ticket": "7d1c0e2a9b3f4c65a8e0d1f2b3c4d5e6", "reason": "the mesh broke"}]
        }
    )

    reason: Annotated[str, AfterValidator(plain_text)] = Field(default="", max_length=2000)
    """Why the run failed (a message, a traceback's tail), kept with the failure: in Unicode's
    NFKC form, each control, zero-width or bidirectional character (other than a line break or
    a tab) written as its code point, `<U+202E>`, as names refuse them."""


class RunAnswer(Body):
    """The answer to ``/fail`` and ``/abandon``: the ticket, what it is now, and the campaign's
    count of failed (or abandoned) runs."""

    ticket: str
    """The ticket reported."""
    status: Literal["failed", "abandoned"]
    """`failed` or `abandoned`."""
    reason: str | None = None
    """The reason given with a failure."""
    count: int
    """Runs of the campaign reported so (failed, or abandoned)."""


class Renewed(Body):
    """A lease extended."""

    ticket: str
    """The ticket renewed."""
    expires_at: float
    """When its lease now ends, unix seconds."""


class Imported(Body):
    """An import stored."""

    n_labeled: int
    """Labels the campaign has now."""
    imported: int
    """Labels this import stored."""


class Failure(Body):
    """A run reported failed: its point, ticket, reason and time (unix seconds)."""

    x: list[Value]
    """The point whose run failed."""
    ticket: str
    """Its ticket."""
    reason: str
    """The reason given."""
    at: float
    """When, unix seconds."""
    fidelity: str | None = None
    """In a campaign with fidelities: the level the run was at."""


class ObservationList(Body):
    """Every label, in the order stored (``x``, ``y``, and ``noise`` in a campaign with known
    noise), and the latest ``FBGP_KEEP_RUNS`` failed runs (``failures``; the status's
    ``n_failed`` counts them all), which no model sees."""

    x: list[list[Value]]
    """The labeled points, one value per input each."""
    y: list[float] | list[dict[str, float]]
    """Their labels (objects `{name: value}` with several outputs), original units."""
    noise: list[float] | list[dict[str, float]] | None = None
    """Their known noise variances (campaigns with known noise only)."""
    fidelity: list[str] | None = None
    """In a campaign with fidelities: each label's level (its name)."""
    failures: list[Failure] = []
    """The latest failed runs (`FBGP_KEEP_RUNS` of them at most)."""


class Observations(Strict):
    """Labeled points (an import, or ``/evaluate``'s test set); ``noise``: their known noise
    variances (campaigns with known noise only)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"x": [[0.1, 1, "steel"], [0.7, 3, "titanium"]], "y": [12.5, 4.25]}]
        }
    )

    x: list[Point] = Field(min_length=1, max_length=100_000)
    """The points, one value per input each."""
    # with several outputs: one object {name: value} per point, or {name: [values]}
    y: YColumn | YColumns
    """Their labels: one number (or `{name: value}`) per point, or with several outputs `{name:
    [values]}` columns; original units (> 0 for an output declared `"transform": "log"`)."""
    noise: NoiseColumn | NoiseColumns | None = None
    """Their known noise variances, shaped as `y` (campaigns with known noise only)."""
    fidelity: list[Annotated[str, Field(min_length=1, max_length=100)]] | None = Field(
        default=None, min_length=1, max_length=100_000
    )
    """In a campaign with fidelities: each point's level (its name), required in an import;
    `/evaluate` takes none (it measures the top level)."""

    @model_validator(mode="after")
    def _same_length(self):
        for field in ("y", "noise"):
            value = getattr(self, field)
            if isinstance(value, dict):  # columns: as rows
                for name, column in value.items():
                    if len(column) != len(self.x):
                        raise ValueError(
                            f"x has {len(self.x)} points but {field}[{name!r}] has "
                            f"{len(column)} values"
                        )
                rows = [{name: value[name][i] for name in value} for i in range(len(self.x))]
                setattr(self, field, rows)
        if len(self.x) != len(self.y):
            raise ValueError(f"x has {len(self.x)} points but y has {len(self.y)} values")
        if self.noise is not None and len(self.noise) != len(self.y):
            raise ValueError(f"noise has {len(self.noise)} values but y has {len(self.y)}")
        return self
