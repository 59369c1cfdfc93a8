"""Request and response bodies (CONTRACT.md). Every number a client sends must be finite.
Names and defaults come from :mod:`worker.defaults` (plain Python, no torch)."""

from __future__ import annotations

import math
from http import HTTPStatus
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    model_serializer,
    model_validator,
)
from pydantic import Strict as StrictValue

from worker.defaults import (
    ACQUISITIONS,
    DEFAULT_ACQUISITION,
    INITIAL_DESIGN_SIZE,
    MCMC_DEFAULTS,
    POOL_SUBSAMPLE,
)

Acquisition = Literal[ACQUISITIONS]  # type: ignore[valid-type]
MAX_POOL = 2**62  # pool indices are 64-bit integers
# a number in JSON: an integer or a float, never a string or a boolean, and finite
Finite = Annotated[float, StrictValue(), Field(allow_inf_nan=False)]
Point = list[Finite]
# an output's largest magnitude: standardized in float64, its variances (y's scale squared)
# stay finite below it
MAX_ABS_Y = 1e150


def _within_range(y: float) -> float:
    if abs(y) > MAX_ABS_Y:
        raise ValueError(f"an output must lie within +-{MAX_ABS_Y:g} (larger magnitudes overflow "
                         "the GP's float64 variances; rescale the output)")  # fmt: skip
    return y


Output = Annotated[Finite, AfterValidator(_within_range)]
# a label's known noise variance: an output's scale squared at most
MAX_NOISE = MAX_ABS_Y**2


def _variance_in_range(v: float) -> float:
    if not 0 <= v <= MAX_NOISE:
        raise ValueError(f"a noise variance must lie within [0, {MAX_NOISE:g}] (the variance "
                         f"of y in its units; a standard deviation of at most "
                         f"{MAX_ABS_Y:g})")  # fmt: skip
    return v


NoiseVariance = Annotated[Finite, AfterValidator(_variance_in_range)]


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
    size: int = Field(default=INITIAL_DESIGN_SIZE, ge=1, le=1000)


class McmcSettings(Strict):
    chains: int = Field(default=MCMC_DEFAULTS["chains"], ge=1, le=32)
    warmup: int = Field(default=MCMC_DEFAULTS["warmup"], ge=0, le=10_000)
    samples: int = Field(default=MCMC_DEFAULTS["samples"], ge=1, le=10_000)
    thinning: int = Field(default=MCMC_DEFAULTS["thinning"], ge=1)
    # start each refit from the previous model's draws, step sizes and mass matrices, with this
    # much step-size warm-up; a refit that does not mix that way is redone cold
    warm_start: bool = MCMC_DEFAULTS["warm_start"]
    warm_warmup: int = Field(default=MCMC_DEFAULTS["warm_warmup"], ge=0, le=10_000)
    # where cold chains start: drawn from a coarse posterior grid, or uniformly in [-2, 2] on the
    # log-hyperparameters (Stan's and Pyro's default, which can miss the main mode)
    init: Literal["grid", "uniform"] = MCMC_DEFAULTS["init"]
    # sampling to a target (worker.mcmc): after `samples` draws per chain, more until `draws`
    # draws for scoring are backed by a bulk ESS of at least `draws` and a split R-hat of at most
    # `target_rhat`, or until `max_samples` per chain; None (a campaign that names a count,
    # `samples` or `thinning`, and no `draws`): exactly `samples`, every `thinning`-th scored
    draws: int | None = Field(default=MCMC_DEFAULTS["draws"], ge=1, le=10_000)
    target_rhat: float = Field(default=MCMC_DEFAULTS["target_rhat"], gt=1.0, le=2.0)
    max_samples: int = Field(default=MCMC_DEFAULTS["max_samples"], ge=1, le=100_000)
    # the mass matrix: Stan's diagonal one, or a dense one (Stan's dense_e)
    metric: Literal["diag", "dense"] = MCMC_DEFAULTS["metric"]

    @model_validator(mode="after")
    def _keeps_a_draw(self):
        if self.thinning > self.samples:
            raise ValueError("thinning must not exceed samples (no draw would be kept)")
        if "draws" not in self.model_fields_set and {"samples", "thinning"} & self.model_fields_set:
            self.draws = None  # a count was named: sample that count
        if self.draws is not None and self.max_samples < self.samples:
            raise ValueError("max_samples must not be below samples")
        return self


class LearnedNoise(Strict):
    """One noise variance ``s2`` for every label, sampled with the lengthscales (the default)."""

    type: Literal["learned"] = "learned"


class KnownNoise(Strict):
    """Each label carries its noise variance (``noise``, or ``y_replicates``); the GP's
    covariance of the labels is ``Kf + diag(noise / y_std^2) + s2 I`` with ``s2`` a learned
    nugget on top."""

    type: Literal["known"]
    nugget: bool = True

    @model_validator(mode="after")
    def _with_nugget(self):
        if not self.nugget:
            raise ValueError("nugget: false is not supported: the sampler's parameters are the "
                             "lengthscales and the nugget s2 (give nugget: true; with accurate "
                             "noise variances its posterior stays small)")  # fmt: skip
        return self


class CampaignFields(Strict):
    """A campaign's settings as posted (CONTRACT.md), with their defaults."""

    name: str = Field(default="campaign", min_length=1, max_length=200)
    inputs: list[InputSpec] = Field(min_length=1, max_length=50)
    pool: GridPoolSpec | PointsPoolSpec = Field(discriminator="type")
    pool_subsample: int = Field(default=POOL_SUBSAMPLE, ge=1, le=1_000_000)
    acquisition: Acquisition = DEFAULT_ACQUISITION
    initial_design: InitialDesign = InitialDesign()
    max_labels: int = Field(ge=1, le=1_000_000)
    mcmc: McmcSettings = McmcSettings()
    mode: Literal["sequential", "parallel"] = "sequential"
    max_pending: int = Field(default=1, ge=1, le=10_000)
    lease_seconds: float = Field(default=3600.0, gt=0, le=30 * 86400, allow_inf_nan=False)
    allow_repeats: bool = False
    # a failed run's point is offered again up to this many times (0: never)
    max_retries: int = Field(default=0, ge=0, le=1000)
    # more failed runs than this and the campaign's status says it is failing [max_labels]
    max_failures: int | None = Field(default=None, ge=0, le=10_000_000)
    seed: int = Field(default=0, ge=0, le=2**32 - 1)
    # "learned" (one noise level) or "known" (each label's own noise variance, and a nugget)
    noise: LearnedNoise | KnownNoise = Field(default_factory=LearnedNoise, discriminator="type")

    @model_serializer(mode="wrap")
    def _learned_noise_unsaid(self, handler):
        """A campaign that learns its noise (the default) is written as before the option
        existed: without ``noise``."""
        data = handler(self)
        if isinstance(data, dict) and data.get("noise") == {"type": "learned"}:
            del data["noise"]
        return data


class CampaignCreate(CampaignFields):
    """``POST /campaigns``: the settings, checked against each other."""

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
            if size > MAX_POOL:
                raise ValueError(f"the grid has {self.pool.points_per_dim}^{d} points, more than "
                                 f"2^62: too many to index")  # fmt: skip
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


class CampaignStatus(BaseModel):
    """``GET /campaigns/{id}``: where the campaign stands."""

    id: str
    name: str
    state: Literal["design", "active", "done", "failed"]  # failed: see last_error, retry
    n_labeled: int
    n_pending: int  # tickets out under a live lease
    max_labels: int
    model_version: int | None
    last_error: str | None
    refit: Literal["idle", "queued", "running"]
    refit_failures: int = 0  # refits failed in a row since the last model
    refit_retry_at: float | None = None  # a failed refit waits until then to run again
    acquisition: str
    mode: str
    inputs: list[InputSpec]  # the names and bounds of x's coordinates, in order
    n_failed: int = 0  # runs reported failed
    n_abandoned: int = 0  # tickets abandoned
    max_failures: int | None = None  # the limit ``failing`` is about
    failing: bool = False  # more failed runs than max_failures
    stalled: bool = False  # runs failed, and no point is left to offer: /next answers 409


class Campaign(CampaignFields):
    """``POST /campaigns``'s answer: the campaign as stored, its status, and its two access
    tokens (shown once)."""

    id: str
    created_at: float
    design_index: list[int]  # the initial design's pool indices
    # pool indices that stand in, in order, for design points whose runs failed for good
    design_reserve: list[int] = []
    status: CampaignStatus
    token: str  # its simulators': /next, /label, /fail, /abandon, /renew and its status
    owner_token: str  # its owner's: everything of this campaign


class NextPoint(BaseModel):
    """``GET /campaigns/{id}/next``: a point to label under ``ticket`` before ``expires_at``."""

    ticket: str
    x: list[float]
    expires_at: float
    model_version: int | None


class NotYet(BaseModel):
    """``/next``'s 202: no point can be given yet; ask again after ``retry_after`` seconds."""

    detail: str
    retry_after: int


class LabelPost(Strict):
    """``POST .../label``: ``y``; in a campaign with known noise also its ``noise`` variance,
    or instead of both, ``y_replicates`` (runs at the same point: ``y`` their mean, ``noise``
    their sample variance over their count, the variance of that mean)."""

    ticket: str = Field(min_length=1, max_length=100)
    y: Output | None = None
    noise: NoiseVariance | None = None
    y_replicates: list[Output] | None = Field(default=None, min_length=2, max_length=100_000)

    @model_validator(mode="after")
    def _one_y(self):
        if self.y_replicates is not None:
            if self.y is not None or self.noise is not None:
                raise ValueError("y_replicates give y (their mean) and noise (the variance of "
                                 "that mean): send them without y and noise")  # fmt: skip
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


class LabelAnswer(BaseModel):
    ticket: str
    y: float
    noise: float | None = None  # in a campaign with known noise
    n_labeled: int


class TicketPost(Strict):
    ticket: str = Field(min_length=1, max_length=100)


class FailPost(TicketPost):
    """``POST .../fail``: the ticket's run failed, and why."""

    reason: str = Field(default="", max_length=2000)


class RunAnswer(BaseModel):
    """The answer to ``/fail`` and ``/abandon``: the ticket, what it is now, and the campaign's
    count of failed (or abandoned) runs."""

    ticket: str
    status: Literal["failed", "abandoned"]
    reason: str | None = None
    count: int


class Renewed(BaseModel):
    ticket: str
    expires_at: float


class Imported(BaseModel):
    n_labeled: int
    imported: int


class Failure(BaseModel):
    """A run reported failed: its point, ticket, reason and time (unix seconds)."""

    x: list[float]
    ticket: str
    reason: str
    at: float


class ObservationList(BaseModel):
    """Every label, in the order stored (``x``, ``y``, and ``noise`` in a campaign with known
    noise), and every failed run (``failures``), which no model sees."""

    x: list[list[float]]
    y: list[float]
    noise: list[float] | None = None
    failures: list[Failure] = []


class Free(BaseModel):
    """A body with these fields at least, and possibly more."""

    model_config = ConfigDict(extra="allow")


class Draws(BaseModel):
    lengthscale: list[list[float]]  # draws x inputs, in unit-cube units
    noise: list[float]  # noise variance, standardized units


class ModeDraw(BaseModel):
    lengthscale: list[float]
    noise: float


class Transform(BaseModel):
    lower: list[float]
    upper: list[float]
    y_mean: float
    y_std: float


class Model(Free):
    """``GET /campaigns/{id}/model``: the posterior draws, the thinned ones acquisitions use,
    the mode, the transforms and the refit's diagnostics (R-hat, ESS, divergences, seconds)."""

    version: int
    n_labeled: int
    samples: Draws
    acquisition_samples: Draws
    mode: ModeDraw
    transform: Transform
    diagnostics: dict[str, Any]


class HistoryEvent(Free):
    """One model stored (``model``), refit failed (``refit_failed``), ``evaluate`` call, run
    failed (``run_failed``: ``ticket``, ``x``, ``reason``) or run abandoned
    (``run_abandoned``)."""

    event: str
    at: float


class Prediction(Free):
    mean: list[float]
    variance: list[float]
    mixture_mean: list[float]
    mixture_variance: list[float]
    model_version: int


class AcquisitionValues(Free):
    values: list[float]
    model_version: int


class Evaluation(Free):
    nlml: float
    rmse: float
    nlpd_mixture: float
    model_version: int


class Health(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    ready: bool
    workers: int | None = None
    detail: str | None = None


class Points(Strict):
    x: list[Point] = Field(min_length=1, max_length=100_000)


class Observations(Strict):
    """Labeled points (an import, or ``/evaluate``'s test set); ``noise``: their known noise
    variances (campaigns with known noise only)."""

    x: list[Point] = Field(min_length=1, max_length=100_000)
    y: list[Output] = Field(min_length=1, max_length=100_000)
    noise: list[NoiseVariance] | None = Field(default=None, min_length=1, max_length=100_000)

    @model_validator(mode="after")
    def _same_length(self):
        if len(self.x) != len(self.y):
            raise ValueError(f"x has {len(self.x)} points but y has {len(self.y)} values")
        if self.noise is not None and len(self.noise) != len(self.y):
            raise ValueError(f"noise has {len(self.noise)} values but y has {len(self.y)}")
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
