"""Request and response bodies (CONTRACT.md). Every number a client sends must be finite."""

from __future__ import annotations

import math
from http import HTTPStatus
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ACQUISITIONS = ("alm", "b-alm", "bald", "b-qbc", "qb-mgp", "random", "bald-std")
Acquisition = Literal["alm", "b-alm", "bald", "b-qbc", "qb-mgp", "random", "bald-std"]
Finite = Annotated[float, Field(allow_inf_nan=False)]
Point = list[Finite]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InputSpec(Strict):
    name: str = Field(min_length=1, max_length=100)
    lower: Finite
    upper: Finite

    @model_validator(mode="after")
    def _ordered(self):
        if not self.lower < self.upper:
            raise ValueError(
                f"input {self.name!r}: lower ({self.lower}) must be below upper ({self.upper})"
            )
        return self


class GridPoolSpec(Strict):
    type: Literal["grid"]
    points_per_dim: int = Field(ge=2, le=100_000)


class PointsPoolSpec(Strict):
    type: Literal["points"]
    points: list[Point] = Field(min_length=1, max_length=1_000_000)


class InitialDesign(Strict):
    type: Literal["maximin-lhs"] = "maximin-lhs"
    size: int = Field(default=3, ge=1, le=1000)


class McmcSettings(Strict):
    chains: int = Field(default=5, ge=1, le=32)
    warmup: int = Field(default=200, ge=0, le=10_000)
    samples: int = Field(default=300, ge=1, le=10_000)
    thinning: int = Field(default=10, ge=1)
    # start each refit from the previous model's draws, step sizes and mass matrices, with this
    # much step-size warm-up; a refit that does not mix that way is redone cold
    warm_start: bool = True
    warm_warmup: int = Field(default=50, ge=0, le=10_000)
    # where cold chains start: drawn from a coarse posterior grid, or uniformly in [-2, 2] on the
    # log-hyperparameters (Stan's and Pyro's default, which can miss the main mode)
    init: Literal["grid", "uniform"] = "grid"

    @model_validator(mode="after")
    def _keeps_a_draw(self):
        if self.thinning > self.samples:
            raise ValueError("thinning must not exceed samples (no draw would be kept)")
        return self


class CampaignCreate(Strict):
    name: str = Field(default="campaign", min_length=1, max_length=200)
    inputs: list[InputSpec] = Field(min_length=1, max_length=50)
    pool: GridPoolSpec | PointsPoolSpec = Field(discriminator="type")
    pool_subsample: int = Field(default=10_000, ge=1, le=1_000_000)
    acquisition: Acquisition = "qb-mgp"
    initial_design: InitialDesign = InitialDesign()
    max_labels: int = Field(ge=1, le=1_000_000)
    mcmc: McmcSettings = McmcSettings()
    mode: Literal["sequential", "parallel"] = "sequential"
    max_pending: int = Field(default=1, ge=1, le=10_000)
    lease_seconds: float = Field(default=3600.0, gt=0, le=30 * 86400, allow_inf_nan=False)
    allow_repeats: bool = False
    seed: int = Field(default=0, ge=0, le=2**32 - 1)

    @model_validator(mode="after")
    def _consistent(self):
        d = len(self.inputs)
        names = [i.name for i in self.inputs]
        if len(set(names)) != len(names):
            raise ValueError("input names must be distinct")
        if self.max_labels < self.initial_design.size:
            raise ValueError(
                f"max_labels ({self.max_labels}) is smaller than the initial design "
                f"({self.initial_design.size})"
            )
        if isinstance(self.pool, GridPoolSpec):
            size = self.pool.points_per_dim**d
        else:
            size = len(self.pool.points)
            for k, point in enumerate(self.pool.points):
                _check_point(point, self.inputs, f"pool point {k}")
        if size < self.initial_design.size:
            raise ValueError(f"the pool ({size} points) is smaller than the initial design")
        if not self.allow_repeats and size < self.max_labels:
            raise ValueError(
                f"max_labels ({self.max_labels}) exceeds the pool ({size} points) and "
                "allow_repeats is false"
            )
        return self


def _check_point(point: list[float], inputs: list[InputSpec], what: str) -> None:
    if len(point) != len(inputs):
        raise ValueError(
            f"{what} has {len(point)} coordinates, the campaign has {len(inputs)} inputs"
        )
    for value, spec in zip(point, inputs, strict=True):
        if not spec.lower <= value <= spec.upper:
            raise ValueError(
                f"{what}: {spec.name} = {value} is outside [{spec.lower}, {spec.upper}]"
            )


class Campaign(CampaignCreate):
    id: str
    created_at: float


class CampaignStatus(BaseModel):
    id: str
    name: str
    state: Literal["design", "active", "done"]
    n_labeled: int
    n_pending: int
    max_labels: int
    model_version: int | None
    last_error: str | None
    refit: str
    acquisition: str
    mode: str


class NextPoint(BaseModel):
    ticket: str
    x: list[float]
    expires_at: float
    model_version: int | None


class LabelPost(Strict):
    ticket: str = Field(min_length=1, max_length=100)
    y: Finite


class LabelAnswer(BaseModel):
    ticket: str
    y: float
    n_labeled: int


class Points(Strict):
    x: list[Point] = Field(min_length=1, max_length=100_000)


class Observations(Strict):
    x: list[Point] = Field(min_length=1, max_length=100_000)
    y: list[Finite] = Field(min_length=1, max_length=100_000)

    @model_validator(mode="after")
    def _same_length(self):
        if len(self.x) != len(self.y):
            raise ValueError(f"x has {len(self.x)} points but y has {len(self.y)} values")
        return self


class AcquisitionRequest(Points):
    acquisition: Acquisition | None = None


def check_points(points: list[list[float]], inputs: list[InputSpec]) -> None:
    """Raise ValueError unless every point has the campaign's dimension and lies in its bounds."""
    for k, point in enumerate(points):
        if any(not math.isfinite(v) for v in point):
            raise ValueError(f"point {k} is not finite")
        _check_point(point, inputs, f"point {k}")


class Problem(BaseModel):
    """An error, as ``application/problem+json`` (RFC 9457)."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str
    errors: list[dict] | None = None


def problem_responses(*codes: int) -> dict:
    """OpenAPI ``responses`` for these error codes, each a :class:`Problem`."""
    schema = Problem.model_json_schema()
    return {code: {"description": HTTPStatus(code).phrase,
                   "content": {"application/problem+json": {"schema": schema}}}
            for code in codes}  # fmt: skip
