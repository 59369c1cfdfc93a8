"""Request and response bodies (CONTRACT.md). Every number a client sends must be finite.
Names and defaults come from :mod:`worker.defaults` (plain Python, no torch)."""

from __future__ import annotations

import math
from http import HTTPStatus
from typing import Annotated, Any, Literal, Required

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictInt,
    model_serializer,
    model_validator,
)
from pydantic import Strict as StrictValue
from typing_extensions import TypedDict

from worker.defaults import (
    ACQUISITIONS,
    DEFAULT_ACQUISITION,
    INITIAL_DESIGN_SIZE,
    MAX_OUTPUTS,
    MCMC_DEFAULTS,
    POOL_SUBSAMPLE,
    STOP_PATIENCE,
    STOP_TARGETS,
)
from worker.space import Space

Acquisition = Literal[ACQUISITIONS]  # type: ignore[valid-type]
MAX_POOL = 2**62  # pool indices are 64-bit integers
# a number in JSON: an integer or a float, never a string or a boolean, and finite
Finite = Annotated[float, StrictValue(), Field(allow_inf_nan=False)]
# a choice input's value: a string or a number (an integer stays one)
MAX_TEXT = 200
Text = Annotated[str, Field(max_length=MAX_TEXT)]
ChoiceValue = Annotated[StrictInt, Field(ge=-(2**53), le=2**53)] | Finite | Text
# a point's coordinate: a number, or a choice input's value (checked per input by
# check_points); a campaign of float inputs reads and writes numbers only, as floats
Point = list[StrictInt | Finite | Text]
Value = int | float | str  # a coordinate as answered
MAX_INT_BOUND = 2**53  # an int input's bounds, exact in float64
MAX_VALUES = 100  # of a choice input: each is a feature of the GP, with a lengthscale of its own
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


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DeclaredInput(TypedDict, total=False):
    """An input as declared (a float's without ``type``, a choice's without bounds)."""

    name: Required[str]
    type: Literal["int", "log", "choice"]
    lower: int | float
    upper: int | float
    values: list[int | float | str]


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
            raise ValueError(f"input {name!r}: its values {same[0]!r} and {same[1]!r} read "
                             "the same as text (in the CSV export and the model's features); "
                             "make them distinct as text")  # fmt: skip
        return
    if spec.type == "int":  # distinct integers within +-2^53: exact
        return
    if spec.type == "log":
        lo, hi, floor = math.log(spec.lower), math.log(spec.upper), 1.0
    else:
        lo, hi, floor = spec.lower, spec.upper, 1e-300
    if not hi - lo > NARROWEST * max(abs(lo), abs(hi), floor):
        scale = "log(upper) - log(lower)" if spec.type == "log" else "upper - lower"
        raise ValueError(f"input {name!r}: its range is too narrow to tell points apart in "
                         f"float64 ({scale} must exceed {NARROWEST:g} of the bounds' size; "
                         "rescale the input)")  # fmt: skip


class InputSpec(Strict):
    """An input: ``{name, lower, upper}`` (a float), with ``"type": "int"`` (integral bounds) or
    ``"type": "log"`` (``lower > 0``), or ``{name, "type": "choice", "values": [...]}``."""

    name: str = Field(min_length=1, max_length=100)
    type: Literal["float", "int", "log", "choice"] = "float"
    lower: Finite | None = None
    upper: Finite | None = None
    values: list[ChoiceValue] | None = Field(default=None, min_length=2, max_length=MAX_VALUES)

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
            raise ValueError(f"input {name!r}: values are for a choice input only "
                             '("type": "choice")')  # fmt: skip
        if self.lower is None or self.upper is None:
            raise ValueError(f"input {name!r}: a {self.type} input needs lower and upper")
        if not self.lower < self.upper:
            raise ValueError(
                f"input {name!r}: lower ({self.lower}) must be below upper ({self.upper})"
            )
        if not math.isfinite(self.upper - self.lower):
            raise ValueError(f"input {name!r}: its range, upper - lower, overflows a float "
                             f"({self.lower} to {self.upper})")  # fmt: skip
        if self.type == "int":
            for bound in (self.lower, self.upper):
                if bound != math.floor(bound) or abs(bound) > MAX_INT_BOUND:
                    raise ValueError(f"input {name!r}: an int input's bounds must be integers "
                                     f"within +-2^53, not {bound}")  # fmt: skip
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
    # cold chains that start from the posterior's modes (init "grid", two inputs or more) begin
    # their warm-up with their mode's Laplace covariance as their metric, not the identity
    start_metric: bool = MCMC_DEFAULTS["start_metric"]
    # the mode GP's draw: the densest under a KDE of the log-hyperparameters ("kde"), or as the
    # paper's code picks it, under a KDE of bandwidth 0.3 on their raw values ("kde-raw")
    mode_rule: Literal["kde", "kde-raw"] = "kde"

    @model_validator(mode="after")
    def _keeps_a_draw(self):
        if self.thinning > self.samples:
            raise ValueError("thinning must not exceed samples (no draw would be kept)")
        if "draws" not in self.model_fields_set and {"samples", "thinning"} & self.model_fields_set:
            self.draws = None  # a count was named: sample that count
        if self.draws is not None and self.max_samples < self.samples:
            raise ValueError("max_samples must not be below samples")
        return self


Threshold = Annotated[float, StrictValue(), Field(gt=0, allow_inf_nan=False)]


class StopRule(Strict):
    """A campaign's stopping rule: it is done once any target is met (the model's ``accuracy``
    value at or below it) on ``patience`` consecutive models, each of at least ``min_labels``
    labels (default: the initial design's size + 1). ``loo_rmse`` in the output's units,
    ``ipv``, ``ipv_f`` and ``qbc`` in its units squared; the ``..._relative`` ones relative to the
    labels' standard deviation (``loo_rmse``) or variance."""

    loo_rmse: Threshold | None = None
    loo_rmse_relative: Threshold | None = None
    ipv: Threshold | None = None
    ipv_relative: Threshold | None = None
    ipv_f: Threshold | None = None
    ipv_f_relative: Threshold | None = None
    qbc: Threshold | None = None
    qbc_relative: Threshold | None = None
    min_labels: int | None = Field(default=None, ge=1, le=1_000_000)
    patience: int = Field(default=STOP_PATIENCE, ge=1, le=1000)

    @model_validator(mode="after")
    def _has_a_target(self):
        if all(getattr(self, name) is None for name in STOP_TARGETS):
            names = ", ".join(STOP_TARGETS)
            raise ValueError(f"a stopping rule needs at least one target: {names}")
        return self


def check_stop(stop: StopRule | None, max_labels: int) -> None:
    """Raise ValueError if the rule's ``min_labels`` exceeds ``max_labels`` (it could never
    stop the campaign)."""
    if stop is not None and stop.min_labels is not None and stop.min_labels > max_labels:
        raise ValueError(f"stop.min_labels ({stop.min_labels}) exceeds max_labels ({max_labels})")


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


class OutputSpec(Strict):
    """A named output of a multi-output campaign, and its weight in the acquisition."""

    name: str = Field(min_length=1, max_length=MAX_TEXT, pattern=r"^[^=\s,]+$")
    weight: float = Field(default=1.0, gt=0, le=1e6, allow_inf_nan=False)


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
    # the GP's inputs: the unit cube of the declared bounds ("box"), or as if min-max scaled by
    # the labeled inputs at every refit, as the paper's code scales them ("labels": the
    # lengthscales' priors are stated for those units; the model reports lengthscales in the box's)
    input_scaling: Literal["box", "labels"] = "box"
    # a failed run's point is offered again up to this many times (0: never)
    max_retries: int = Field(default=0, ge=0, le=1000)
    # more failed runs than this (since the owner's last retry) and the campaign is failing:
    # /next hands out no point until its owner retries it [max_labels]
    max_failures: int | None = Field(default=None, ge=0, le=10_000_000)
    seed: int = Field(default=0, ge=0, le=2**32 - 1)
    # stop before max_labels once the model's accuracy estimates meet a target (StopRule)
    stop: StopRule | None = None
    # "learned" (one noise level) or "known" (each label's own noise variance, and a nugget)
    noise: LearnedNoise | KnownNoise = Field(default_factory=LearnedNoise, discriminator="type")
    # named outputs of one simulation, each with its own GP (absent: one output, y a number)
    outputs: list[OutputSpec] | None = Field(default=None, min_length=2, max_length=MAX_OUTPUTS)

    @model_serializer(mode="wrap")
    def _learned_noise_unsaid(self, handler):
        """A campaign that learns its noise (the default) is written as before the option
        existed: without ``noise``."""
        data = handler(self)
        if isinstance(data, dict) and data.get("noise") == {"type": "learned"}:
            del data["noise"]
        if isinstance(data, dict) and data.get("outputs", ()) is None:
            del data["outputs"]
        return data


class CampaignCreate(CampaignFields):
    """``POST /campaigns``: the settings, checked against each other."""

    @model_validator(mode="after")
    def _consistent(self):
        names = [i.name for i in self.inputs]
        if len(set(names)) != len(names):
            raise ValueError("input names must be distinct")
        for spec in self.inputs:
            check_distinguishable(spec)
        if self.outputs is not None:
            outputs = [o.name for o in self.outputs]
            if len(set(outputs)) != len(outputs):
                raise ValueError("outputs: their names must be distinct")
        if self.max_labels < self.initial_design.size:
            raise ValueError(
                f"max_labels ({self.max_labels}) is smaller than the initial design "
                f"({self.initial_design.size})"
            )
        check_stop(self.stop, self.max_labels)
        space = space_of(self.inputs)
        features = space.feature_names
        if len(set(features)) != len(features):
            same = next(f for f in features if features.count(f) > 1)
            raise ValueError(f"two of the model's features read {same!r} (a choice's value "
                             "reads '<input>=<value>'); rename an input")  # fmt: skip
        if isinstance(self.pool, GridPoolSpec):
            size = space.grid_size(self.pool.points_per_dim)
            if size > MAX_POOL:
                shape = space.grid_shape(self.pool.points_per_dim)
                raise ValueError(f"the grid has {shape} points, more than 2^62: too many to "
                                 "index")  # fmt: skip
        else:
            size = len(self.pool.points)
            self.pool.points = _canonical(self.pool.points, space, "pool point")
            if len({tuple(p) for p in self.pool.points}) < size:
                why = " (an int input's values are integers)" if space.typed else ""
                raise ValueError(f"the pool's points must be distinct{why}")
        if size < self.initial_design.size:
            raise ValueError(f"the pool ({size} points) is smaller than the initial design")
        if not self.allow_repeats and size < self.max_labels:
            raise ValueError(
                f"max_labels ({self.max_labels}) exceeds the pool ({size} points) and "
                "allow_repeats is false"
            )
        return self


def space_of(inputs: list[InputSpec] | list[dict]) -> Space:
    """The inputs' :class:`worker.space.Space`."""
    return Space.of([i if isinstance(i, dict) else i.model_dump() for i in inputs])


def _canonical(points: list[list], space: Space, what: str) -> list[list]:
    """The points with each coordinate as its input keeps it, or ValueError naming the point,
    the input and what is wrong (``what``: how to name a point)."""
    for k, point in enumerate(points):
        if len(point) != space.dim:
            raise ValueError(f"{what} {k} has {len(point)} coordinates, the campaign has "
                             f"{space.dim} inputs")  # fmt: skip
    try:
        return space.canonical(points)
    except ValueError as error:
        raise ValueError(f"{what} {str(error).removeprefix('point ')}") from None


class StoppedBy(BaseModel):
    """The stopping rule's target that was met: its ``value`` at model ``version`` (at or below
    ``target`` on ``patience`` consecutive models), and when (unix seconds)."""

    rule: str
    value: float
    target: float
    version: int
    at: float


class Resume(Strict):
    """``POST /campaigns/{id}/resume``: optionally a new stopping rule (``null``: none)."""

    stop: StopRule | None = None


class CampaignStatus(BaseModel):
    """``GET /campaigns/{id}``: where the campaign stands."""

    id: str
    name: str
    team: str | None = None  # the team whose token created it (None: the service token's)
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
    inputs: list[InputSpec]  # x's coordinates, in order: names, types, bounds or values
    n_failed: int = 0  # runs reported failed
    n_abandoned: int = 0  # tickets abandoned
    n_forgiven: int = 0  # failed runs forgiven by the owner's retries (POST .../retry)
    max_failures: int | None = None  # the limit ``failing`` is about
    # more failed runs than max_failures, but for those forgiven: /next answers 409 (no point
    # is handed out) until the owner retries the campaign
    failing: bool = False
    stalled: bool = False  # runs failed, and no point is left to offer: /next answers 409
    stopped_by: StoppedBy | None = None  # done by its stopping rule: /next answers 410


class Campaign(CampaignFields):
    """``POST /campaigns``'s answer: the campaign as stored, its status, and its two access
    tokens (shown once)."""

    id: str
    created_at: float
    team: str | None = None  # the team whose token created it (None: the service token's)
    tenant: int = 0  # its team's tenant: the queue of each lane its refits wait in (0: no team)
    design_index: list[int]  # the initial design's pool indices
    # pool indices that stand in, in order, for design points whose runs failed for good
    design_reserve: list[int] = []
    status: CampaignStatus
    token: str  # its simulators': /next, /label, /fail, /abandon, /renew and its status
    owner_token: str  # its owner's: everything of this campaign


TEAM_NAME = r"^[a-z0-9][a-z0-9_.-]{0,63}$"


class TeamCreate(Strict):
    """``POST /teams``: a team of the stack, by name."""

    name: str = Field(pattern=TEAM_NAME, description="lower-case letters, digits, '_', '.' "
                      "and '-', starting with a letter or digit; at most 64")  # fmt: skip


class Team(BaseModel):
    """A team: its name, when it was made, whether its token is live (a deleted team that
    still holds campaigns is listed, not live), how many campaigns its token created, and its
    tenant: teams of different tenants take turns on the workers."""

    name: str
    created_at: float
    live: bool
    n_campaigns: int
    tenant: int  # the queue of each lane its campaigns' refits wait in (service/queues.py)


class TeamToken(BaseModel):
    """A team's token, shown once: it creates and lists campaigns, and opens those it created
    (as their owner token does); nothing else."""

    name: str
    token: str


class NextPoint(BaseModel):
    """``GET /campaigns/{id}/next``: a point to label under ``ticket`` before ``expires_at``."""

    ticket: str
    x: list[Value]
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
    # with several outputs, objects {name: ...} (checked against the campaign's outputs)
    y: Output | OutputValues | None = None
    noise: NoiseVariance | OutputVariances | None = None
    y_replicates: Replicates | Annotated[dict[str, Replicates], _OUTPUTS] | None = None

    @model_validator(mode="after")
    def _one_y(self):
        if self.y_replicates is not None:
            if self.y is not None or self.noise is not None:
                raise ValueError("y_replicates give y (their mean) and noise (the variance of "
                                 "that mean): send them without y and noise")  # fmt: skip
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


class LabelAnswer(BaseModel):
    ticket: str
    y: float | dict[str, float]
    noise: float | dict[str, float] | None = None  # in a campaign with known noise
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

    x: list[Value]
    ticket: str
    reason: str
    at: float


class ObservationList(BaseModel):
    """Every label, in the order stored (``x``, ``y``, and ``noise`` in a campaign with known
    noise), and the latest ``FBGP_KEEP_RUNS`` failed runs (``failures``; the status's
    ``n_failed`` counts them all), which no model sees."""

    x: list[list[Value]]
    y: list[float] | list[dict[str, float]]
    noise: list[float] | list[dict[str, float]] | None = None
    failures: list[Failure] = []


class Free(BaseModel):
    """A body with these fields at least, and possibly more."""

    model_config = ConfigDict(extra="allow")


class Draws(BaseModel):
    # draws x the GP's features (an input, or a choice's value: the model's ``features``), in
    # unit-cube units
    lengthscale: list[list[float]]
    noise: list[float]  # noise variance, standardized units


class ModeDraw(BaseModel):
    lengthscale: list[float]
    noise: float


class Transform(Free):
    """Inputs to the unit cube by ``lower`` and ``upper`` (a choice: its value index, 0 to
    ``k - 1``; typed ``inputs`` listed), outputs standardized by ``y_mean`` and ``y_std``."""

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


class OutputTransform(Free):
    y_mean: float
    y_std: float


class OutputModel(Free):
    """One output's part of a multi-output model: its draws, mode, output transform,
    diagnostics and accuracy."""

    samples: Draws
    acquisition_samples: Draws
    mode: ModeDraw
    transform: OutputTransform
    diagnostics: dict[str, Any]


class InputTransform(Free):
    lower: list[float]
    upper: list[float]


class MultiModel(Free):
    """A multi-output campaign's model: each output's (``outputs``, by name), the inputs'
    transform, and the refit's diagnostics over all outputs."""

    version: int
    n_labeled: int
    outputs: dict[str, OutputModel]
    transform: InputTransform
    diagnostics: dict[str, Any]


class CampaignRef(BaseModel):
    id: str
    name: str


class LabeledData(BaseModel):
    """The labels a model saw, original units; ``noise``: each label's known noise variance,
    only when the labels carry it."""

    x: list[list[Value]]
    y: list[float] | list[dict[str, float]]
    noise: list[float] | list[dict[str, float]] | None = None


class MetamodelExport(Free):
    """``GET /campaigns/{id}/model/export``: a model with everything it needs to predict without
    the service (the SDK's ``clients.metamodel.Metamodel`` loads it): the draws, the mode, the
    transforms and the labeled data it saw. ``format_version`` changes when a reader must."""

    format: Literal["fbgp-al-metamodel"]
    format_version: int
    campaign: CampaignRef
    version: int
    n_labeled: int
    inputs: list[dict[str, Any]]
    kernel: Literal["rbf-ard"]
    transform: Transform
    samples: Draws
    acquisition_samples: Draws
    mode: ModeDraw
    data: LabeledData
    diagnostics: dict[str, Any]
    exported_at: float


class ExportedOutput(Free):
    transform: OutputTransform
    samples: Draws
    acquisition_samples: Draws
    mode: ModeDraw


class MultiMetamodelExport(Free):
    """A multi-output campaign's exported model (``format_version`` 2): each output's draws,
    mode and output transform under ``outputs``; ``data.y`` (and ``noise``) objects
    ``{name: value}``."""

    format: Literal["fbgp-al-metamodel"]
    format_version: Literal[2]
    campaign: CampaignRef
    version: int
    n_labeled: int
    inputs: list[dict[str, Any]]
    kernel: Literal["rbf-ard"]
    transform: InputTransform
    outputs: dict[str, ExportedOutput]
    data: LabeledData
    diagnostics: dict[str, Any]
    exported_at: float


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


class OutputPrediction(Free):
    mean: list[float]
    variance: list[float]
    mixture_mean: list[float]
    mixture_variance: list[float]


class MultiPrediction(Free):
    outputs: dict[str, OutputPrediction]
    model_version: int


class AcquisitionValues(Free):
    values: list[float]
    model_version: int


class Evaluation(Free):
    nlml: float
    rmse: float
    nlpd_mixture: float
    # the test NLML as the paper's code computes it (noise counted twice, the mode's log prior)
    nlml_paper: float | None = None
    model_version: int


class OutputEvaluation(Free):
    nlml: float
    rmse: float
    nlpd_mixture: float
    nlml_paper: float | None = None


class MultiEvaluation(Free):
    outputs: dict[str, OutputEvaluation]
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
    # with several outputs: one object {name: value} per point, or {name: [values]}
    y: YColumn | YColumns
    noise: NoiseColumn | NoiseColumns | None = None

    @model_validator(mode="after")
    def _same_length(self):
        for field in ("y", "noise"):
            value = getattr(self, field)
            if isinstance(value, dict):  # columns: as rows
                for name, column in value.items():
                    if len(column) != len(self.x):
                        raise ValueError(f"x has {len(self.x)} points but {field}[{name!r}] has "
                                         f"{len(column)} values")  # fmt: skip
                rows = [{name: value[name][i] for name in value} for i in range(len(self.x))]
                setattr(self, field, rows)
        if len(self.x) != len(self.y):
            raise ValueError(f"x has {len(self.x)} points but y has {len(self.y)} values")
        if self.noise is not None and len(self.noise) != len(self.y):
            raise ValueError(f"noise has {len(self.noise)} values but y has {len(self.y)}")
        return self


class AcquisitionRequest(Points):
    acquisition: Acquisition | None = None


def check_points(points: list[list], inputs: list[dict]) -> list[list]:
    """The points with each coordinate as its input keeps it (a float, an int, a choice's
    value); ValueError unless every point has the campaign's dimension and each value is one
    of its input's (a number within its bounds, an integer, one of a choice's values)."""
    return _canonical(points, space_of(inputs), "point")


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
