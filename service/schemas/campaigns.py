"""Request and response bodies of the HTTP API. Every number a client sends must be finite.
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

from service.names import look_alikes, visible
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
# text a user wrote and people read: NFKC, nothing hidden (service.names)
Text = Annotated[str, Field(max_length=MAX_TEXT), AfterValidator(visible)]
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


class Body(BaseModel):
    """A body of the API: each field's docstring is its description in the OpenAPI document."""

    model_config = ConfigDict(use_attribute_docstrings=True)


class Strict(Body):
    model_config = ConfigDict(extra="forbid")


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
    """A grid pool, never built in memory: `points_per_dim` levels of each float or log input (a
    log input's evenly spaced on the log scale), `min(points_per_dim, upper - lower + 1)`
    integers of an int input, every value of a choice."""

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


class InitialDesign(Strict):
    """The first labels: a maximin Latin hypercube snapped to the pool, before any model chooses."""

    type: Literal["maximin-lhs"] = "maximin-lhs"
    """`maximin-lhs`, the only design."""
    size: int = Field(default=INITIAL_DESIGN_SIZE, ge=1, le=1000)
    """Points of the initial design (at most `max_labels`)."""


class McmcSettings(Strict):
    """How each refit samples the GP's hyperparameters by NUTS. The defaults sample to a target
    (`draws`, `target_rhat`); naming `samples` or `thinning` without `draws` samples that count."""

    chains: int = Field(default=MCMC_DEFAULTS["chains"], ge=1, le=32)
    """NUTS chains per refit."""
    warmup: int = Field(default=MCMC_DEFAULTS["warmup"], ge=0, le=10_000)
    """Warm-up iterations of a cold chain (step size and mass matrix adaptation, Stan's windows)."""
    samples: int = Field(default=MCMC_DEFAULTS["samples"], ge=1, le=10_000)
    """Draws per chain kept after warm-up (sampling to a target: the first round; more follow while
    the target is not met)."""
    thinning: int = Field(default=MCMC_DEFAULTS["thinning"], ge=1)
    """Every `thinning`-th draw is scored by the acquisition (when a count is named)."""
    # start each refit from the previous model's draws, step sizes and mass matrices, with this
    # much step-size warm-up; a refit that does not mix that way is redone cold
    warm_start: bool = MCMC_DEFAULTS["warm_start"]
    """Start each refit from the previous model's last draws, step sizes and mass matrices, with a
    short warm-up (`warm_warmup`); a warm refit that does not mix is redone cold."""
    warm_warmup: int = Field(default=MCMC_DEFAULTS["warm_warmup"], ge=0, le=10_000)
    """Step-size warm-up iterations of a warm-started refit."""
    # where cold chains start: drawn from a coarse posterior grid, or uniformly in [-2, 2] on the
    # log-hyperparameters (Stan's and Pyro's default, which can miss the main mode)
    init: Literal["grid", "uniform"] = MCMC_DEFAULTS["init"]
    """Where cold chains start: `grid`, in the posterior's modes in proportion to their mass;
    `uniform`, uniformly in [-2, 2] on the log-hyperparameters (Stan's and Pyro's start)."""
    # sampling to a target (worker.mcmc): after `samples` draws per chain, more until `draws`
    # draws for scoring are backed by a bulk ESS of at least `draws` and a split R-hat of at most
    # `target_rhat`, or until `max_samples` per chain; None (a campaign that names a count,
    # `samples` or `thinning`, and no `draws`): exactly `samples`, every `thinning`-th scored
    draws: int | None = Field(default=MCMC_DEFAULTS["draws"], ge=1, le=10_000)
    """Sampling to a target: draws handed to the acquisition, each hyperparameter's bulk ESS at
    least this many; `null` with `samples` or `thinning` named: exactly that count."""
    target_rhat: float = Field(default=MCMC_DEFAULTS["target_rhat"], gt=1.0, le=2.0)
    """Sampling to a target: the largest split R-hat accepted."""
    max_samples: int = Field(default=MCMC_DEFAULTS["max_samples"], ge=1, le=100_000)
    """Sampling to a target: the most draws per chain, whether or not the target is met."""
    # the mass matrix: Stan's diagonal one, or a dense one (Stan's dense_e)
    metric: Literal["diag", "dense"] = MCMC_DEFAULTS["metric"]
    """The mass matrix: `diag` (Stan's diagonal) or `dense` (Stan's dense_e)."""
    # cold chains that start from the posterior's modes (init "grid", two inputs or more) begin
    # their warm-up with their mode's Laplace covariance as their metric, not the identity
    start_metric: bool = MCMC_DEFAULTS["start_metric"]
    """Cold chains started in the posterior's modes begin their warm-up with their mode's Laplace
    covariance as metric, not the identity."""
    # the mode GP's draw: the densest under a KDE of the log-hyperparameters ("kde"), or as the
    # paper's code picks it, under a KDE of bandwidth 0.3 on their raw values ("kde-raw")
    mode_rule: Literal["kde", "kde-raw"] = "kde"
    """How the mode GP's draw is picked: `kde`, the densest under a KDE of the log-hyperparameters;
    `kde-raw`, under a KDE of bandwidth 0.3 on their raw values (the paper's code)."""
    noise_floor: Annotated[float, StrictValue()] = Field(
        default=MCMC_DEFAULTS["noise_floor"], ge=0.0, le=0.1, allow_inf_nan=False
    )
    """The least noise variance the GP may learn, as a fraction of the labels' variance (0 to
    0.1; default 1e-6): the noise is this floor plus a LogNormal(0, sqrt(3)) draw. It keeps a
    deterministic simulator's campaign quick and well mixed; 0 removes it."""

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
    """Target for the leave-one-out RMSE of the mixture, in the output's units."""
    loo_rmse_relative: Threshold | None = None
    """Target for the leave-one-out RMSE over the labels' standard deviation (a fraction)."""
    ipv: Threshold | None = None
    """Target for the mixture's predictive variance of y averaged over the pool, in the output's
    units squared."""
    ipv_relative: Threshold | None = None
    """Target for `ipv` over the labels' variance (a fraction)."""
    ipv_f: Threshold | None = None
    """Target for the predictive variance of the latent f (no noise) averaged over the pool, in the
    output's units squared."""
    ipv_f_relative: Threshold | None = None
    """Target for `ipv_f` over the labels' variance (a fraction)."""
    qbc: Threshold | None = None
    """Target for the variance of the draws' means averaged over the pool (B-QBC's score), in the
    output's units squared."""
    qbc_relative: Threshold | None = None
    """Target for `qbc` over the labels' variance (a fraction)."""
    min_labels: int | None = Field(default=None, ge=1, le=1_000_000)
    """Models with fewer labels never stop the campaign (default: the initial design's size + 1)."""
    patience: int = Field(default=STOP_PATIENCE, ge=1, le=1000)
    """Consecutive models that must meet a target."""

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
    """`learned`: one noise variance for all labels, sampled with the lengthscales."""


class KnownNoise(Strict):
    """Each label carries its noise variance (``noise``, or ``y_replicates``); the GP's
    covariance of the labels is ``Kf + diag(noise / y_std^2) + s2 I`` with ``s2`` a learned
    nugget on top."""

    type: Literal["known"]
    """`known`: each label carries its own noise variance."""
    nugget: bool = True
    """A learned nugget on top of the known variances; `true` is the only choice."""

    @model_validator(mode="after")
    def _with_nugget(self):
        if not self.nugget:
            raise ValueError("nugget: false is not supported: the sampler's parameters are the "
                             "lengthscales and the nugget s2 (give nugget: true; with accurate "
                             "noise variances its posterior stays small)")  # fmt: skip
        return self


class OutputSpec(Strict):
    """A named output of a multi-output campaign, and its weight in the acquisition."""

    name: Annotated[str, AfterValidator(visible)] = Field(
        min_length=1, max_length=MAX_TEXT, pattern=r"^[^=\s,]+$"
    )
    """The output's name (no spaces, `=` or `,`; NFKC, nothing invisible, one script): the key of
    `y` in labels and answers."""
    weight: float = Field(default=1.0, gt=0, le=1e6, allow_inf_nan=False)
    """The output's weight in the acquisition: points are ranked by the weighted sum of each
    output's standardized score."""


class CampaignFields(Strict):
    """A campaign's settings as posted, with their defaults."""

    name: Annotated[str, AfterValidator(visible)] = Field(
        default="campaign", min_length=1, max_length=200
    )
    """A name for people (pages, listings); need not be unique. Stored in Unicode's NFKC form;
    one with an invisible or bidirectional character, or mixing Latin, Greek and Cyrillic
    letters, is a 422."""
    inputs: list[InputSpec] = Field(min_length=1, max_length=50)
    """The simulator's inputs, in the order of a point's coordinates."""
    pool: GridPoolSpec | PointsPoolSpec = Field(discriminator="type")
    """The candidate points: a `grid` over the inputs or an explicit list of `points`."""
    pool_subsample: int = Field(default=POOL_SUBSAMPLE, ge=1, le=1_000_000)
    """Candidates scored per refit: a fresh random subset of a larger pool."""
    acquisition: Acquisition = DEFAULT_ACQUISITION
    """How the next point is chosen: `qb-mgp`, `b-qbc` (the paper's), `alm`, `b-alm`, `bald`,
    `random`, or `bald-code` (alias `bald-std`: BALD as the paper's code computes it)."""
    initial_design: InitialDesign = InitialDesign()
    """The first labels, before any model chooses."""
    max_labels: int = Field(ge=1, le=1_000_000)
    """The campaign is done after this many labels (at most `FBGP_LIMIT_LABELS`, 2,000 by
    default)."""
    mcmc: McmcSettings = McmcSettings()
    """The NUTS settings of each refit."""
    mode: Literal["sequential", "parallel"] = "sequential"
    """`sequential`: one point out at a time, each chosen by a model that saw every label;
    `parallel`: up to `max_pending` points out at once, chosen as a greedy batch."""
    max_pending: int = Field(default=1, ge=1, le=10_000)
    """Points out at once in a `parallel` campaign."""
    lease_seconds: float = Field(default=3600.0, gt=0, le=30 * 86400, allow_inf_nan=False)
    """Seconds a ticket holds its point before the point is offered again (`/renew` extends it), in
    seconds."""
    allow_repeats: bool = False
    """Keep labeled points in the pool, so the model may choose one again (the paper's code); the
    initial design still labels distinct points."""
    # the GP's inputs: the unit cube of the declared bounds ("box"), or as if min-max scaled by
    # the labeled inputs at every refit, as the paper's code scales them ("labels": the
    # lengthscales' priors are stated for those units; the model reports lengthscales in the box's)
    input_scaling: Literal["box", "labels"] = "box"
    """The GP's inputs: `box`, the unit cube of the declared bounds; `labels`, as if min-max scaled
    by the labeled inputs at every refit (the paper's code)."""
    # a failed run's point is offered again up to this many times (0: never)
    max_retries: int = Field(default=0, ge=0, le=1000)
    """Times a failed run's point is offered again (0: never)."""
    # more failed runs than this (since the owner's last retry) and the campaign is failing:
    # /next hands out no point until its owner retries it [max_labels]
    max_failures: int | None = Field(default=None, ge=0, le=10_000_000)
    """More failed runs than this (since the owner's last retry) make the campaign `failing`:
    `/next` hands out no point until the owner retries (default: `max_labels`)."""
    seed: int = Field(default=0, ge=0, le=2**32 - 1)
    """Seeds the initial design, the pool subsamples and the sampler."""
    # stop before max_labels once the model's accuracy estimates meet a target (StopRule)
    stop: StopRule | None = None
    """A stopping rule: done before `max_labels` once the model's accuracy estimates meet a
    target."""
    # "learned" (one noise level) or "known" (each label's own noise variance, and a nugget)
    noise: LearnedNoise | KnownNoise = Field(default_factory=LearnedNoise, discriminator="type")
    """`{"type": "learned"}` (one noise level) or `{"type": "known"}` (each label's own noise
    variance)."""
    # named outputs of one simulation, each with its own GP (absent: one output, y a number)
    outputs: list[OutputSpec] | None = Field(default=None, min_length=2, max_length=MAX_OUTPUTS)
    """Named outputs of one simulation (2 to 16), each with its own GP; absent: one output, `y` a
    number."""

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

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "beam",
                    "inputs": [
                        {"name": "load", "lower": 0, "upper": 1},
                        {"name": "layers", "type": "int", "lower": 1, "upper": 4},
                        {"name": "alloy", "type": "choice", "values": ["steel", "titanium"]},
                    ],
                    "pool": {"type": "grid", "points_per_dim": 21},
                    "max_labels": 30,
                    "mode": "parallel",
                    "max_pending": 4,
                    "stop": {"loo_rmse_relative": 0.05},
                }
            ]
        }
    )

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
            names += outputs
        same = look_alikes(names)
        for spec in self.inputs:
            same = same or look_alikes([v for v in spec.values or () if isinstance(v, str)])
        if same:
            raise ValueError(f"{same[0]!r} and {same[1]!r} look alike (Latin beside Greek or "
                             "Cyrillic letters): name them apart")  # fmt: skip
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


class StoppedBy(Body):
    """The stopping rule's target that was met: its ``value`` at model ``version`` (at or below
    ``target`` on ``patience`` consecutive models), and when (unix seconds)."""

    rule: str
    """The target met (`loo_rmse`, `qbc_relative`, ...)."""
    value: float
    """Its value at the model that stopped the campaign."""
    target: float
    """The threshold it met."""
    version: int
    """The model's version."""
    at: float
    """When, unix seconds."""


class Resume(Strict):
    """``POST /campaigns/{id}/resume``: optionally a new stopping rule (``null``: none)."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"stop": {"qbc_relative": 0.01, "patience": 3}}]}
    )

    stop: StopRule | None = None
    """A new stopping rule; `null` removes it; absent keeps the rule."""


class CampaignStatus(Body):
    """``GET /campaigns/{id}``: where the campaign stands."""

    id: str
    """The campaign's id."""
    name: str
    """Its name."""
    team: str | None = None  # the team whose token created it (None: the service token's)
    """The team whose token created it (`null`: the service token's)."""
    state: Literal["design", "active", "done", "failed"]  # failed: see last_error, retry
    """`design` (the initial design is being labeled), `active`, `done` (max_labels, its stopping
    rule, or the pool used up) or `failed` (refits kept failing: see `last_error`, then `POST
    .../retry`)."""
    n_labeled: int
    """Labels stored."""
    n_pending: int  # tickets out under a live lease
    """Tickets out under a live lease."""
    max_labels: int
    """The campaign is done after this many labels."""
    model_version: int | None
    """The latest model's version (`null` before the first)."""
    last_error: str | None
    """Why the last refit failed (`null` if it did not)."""
    refit: Literal["idle", "queued", "running"]
    """`idle`, `queued` or `running`."""
    refit_failures: int = 0  # refits failed in a row since the last model
    """Refits failed in a row since the last model."""
    refit_retry_at: float | None = None  # a failed refit waits until then to run again
    """A failed refit waits until then to run again, unix seconds."""
    acquisition: str
    """The campaign's acquisition."""
    mode: str
    """`sequential` or `parallel`."""
    inputs: list[InputSpec]  # x's coordinates, in order: names, types, bounds or values
    """The inputs, in the order of a point's coordinates: names, types, bounds or values."""
    n_failed: int = 0  # runs reported failed
    """Runs reported failed."""
    n_abandoned: int = 0  # tickets abandoned
    """Tickets abandoned."""
    n_forgiven: int = 0  # failed runs forgiven by the owner's retries (POST .../retry)
    """Failed runs forgiven by the owner's retries (`POST .../retry`)."""
    max_failures: int | None = None  # the limit ``failing`` is about
    """The limit `failing` is about."""
    # more failed runs than max_failures, but for those forgiven: /next answers 409 (no point
    # is handed out) until the owner retries the campaign
    failing: bool = False
    """More failed runs than `max_failures` (but for those forgiven): `/next` answers 409 until the
    owner retries."""
    stalled: bool = False  # runs failed, and no point is left to offer: /next answers 409
    """Runs failed and no point is left to offer: `/next` answers 409."""
    stopped_by: StoppedBy | None = None  # done by its stopping rule: /next answers 410
    """Done by its stopping rule: which target was met (`/next` answers 410)."""


class Campaign(CampaignFields):
    """``POST /campaigns``'s answer: the campaign as stored, its status, and its two access
    tokens (shown once)."""

    id: str
    """The campaign's id."""
    created_at: float
    """When it was created, unix seconds."""
    team: str | None = None  # the team whose token created it (None: the service token's)
    """The team whose token created it (`null`: the service token or an open service)."""
    tenant: int = 0  # its team's tenant: the queue of each lane its refits wait in (0: no team)
    """Its team's tenant: which of the refit queues its refits wait in (0: no team)."""
    design_index: list[int]  # the initial design's pool indices
    """The initial design's pool indices."""
    # pool indices that stand in, in order, for design points whose runs failed for good
    design_reserve: list[int] = []
    """Pool indices that stand in, in order, for design points that failed for good."""
    status: CampaignStatus
    """Where the campaign stands."""
    token: str  # its simulators': /next, /label, /fail, /abandon, /renew and its status
    """The simulator token, shown once: it opens `/next`, `/label`, `/fail`, `/abandon`, `/renew`
    and the status of this campaign."""
    owner_token: str  # its owner's: everything of this campaign
    """The owner token, shown once: it opens every call of this campaign."""


TEAM_NAME = r"^[a-z0-9][a-z0-9_.-]{0,63}$"


class TeamCreate(Strict):
    """``POST /teams``: a team of the stack, by name."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"name": "physics"}]})

    name: str = Field(pattern=TEAM_NAME, description="lower-case letters, digits, '_', '.' "
                      "and '-', starting with a letter or digit; at most 64")  # fmt: skip


class Team(Body):
    """A team: its name, when it was made, whether its token is live (a deleted team that
    still holds campaigns is listed, not live), how many campaigns its token created, and its
    tenant: teams of different tenants take turns on the workers."""

    name: str
    """The team's name."""
    created_at: float
    """When it was made, unix seconds."""
    live: bool
    """Whether its token works (a deleted team that holds campaigns stays listed, not live)."""
    n_campaigns: int
    """Campaigns it holds."""
    tenant: int  # the queue of each lane its campaigns' refits wait in (service/queues.py)
    """Its tenant: which refit queue of each lane its campaigns' refits wait in."""


class TeamToken(Body):
    """A team's token, shown once: it creates and lists campaigns, and opens those it created
    (as their owner token does); nothing else."""

    name: str
    """The team's name."""
    token: str
    """Its token, shown once (only its SHA-256 is kept)."""


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
    the output's units (|y| at most 1e150)."""
    noise: NoiseVariance | OutputVariances | None = None
    """With known noise: the variance of `y`, in y's units squared (0 to 1e300), or `{name:
    variance}`."""
    y_replicates: Replicates | Annotated[dict[str, Replicates], _OUTPUTS] | None = None
    """With known noise, instead of `y` and `noise`: 2 or more runs at the point (`{name: [...]}`
    with several outputs); y is their mean and noise their sample variance over their count."""

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

    reason: str = Field(default="", max_length=2000)
    """Why the run failed (a message, a traceback's tail), kept with the failure."""


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
    failures: list[Failure] = []
    """The latest failed runs (`FBGP_KEEP_RUNS` of them at most)."""


class Free(Body):
    """A body with these fields at least, and possibly more."""

    model_config = ConfigDict(extra="allow")


class Draws(Body):
    # draws x the GP's features (an input, or a choice's value: the model's ``features``), in
    # unit-cube units
    """Posterior draws of the GP's hyperparameters."""

    lengthscale: list[list[float]]
    """Per draw, one lengthscale per GP feature (an input, or a choice's value: the model's
    `features`), in unit-cube units."""
    noise: list[float]  # noise variance, standardized units
    """Per draw, the noise variance (with known noise: the nugget), in standardized units."""


class ModeDraw(Body):
    """The posterior-mode GP's hyperparameters."""

    lengthscale: list[float]
    """One lengthscale per GP feature, in unit-cube units."""
    noise: float
    """Its noise variance, in standardized units."""


class Transform(Free):
    """Inputs to the unit cube by ``lower`` and ``upper`` (a choice: its value index, 0 to
    ``k - 1``; typed ``inputs`` listed), outputs standardized by ``y_mean`` and ``y_std``."""

    lower: list[float]
    """Each input's lower bound (a choice: 0)."""
    upper: list[float]
    """Each input's upper bound (a choice: its number of values - 1)."""
    y_mean: float
    """The labels' mean: y is standardized as (y - y_mean) / y_std."""
    y_std: float
    """The labels' standard deviation (1 for constant labels)."""


class Model(Free):
    """``GET /campaigns/{id}/model``: the posterior draws, the thinned ones acquisitions use,
    the mode, the transforms and the refit's diagnostics (R-hat, ESS, divergences, seconds)."""

    version: int
    """The model's version (one per refit that stored a model)."""
    n_labeled: int
    """Labels the model saw."""
    samples: Draws
    """All the posterior draws kept."""
    acquisition_samples: Draws
    """The thinned draws the acquisition and `/predict`'s mixture use."""
    mode: ModeDraw
    """The posterior-mode GP."""
    transform: Transform
    """How inputs and outputs are scaled for the GP."""
    diagnostics: dict[str, Any]
    """The refit's diagnostics: largest R-hat, smallest bulk ESS, divergences, seconds, warm start,
    target met."""


class OutputTransform(Free):
    """How an output is standardized."""

    y_mean: float
    """The output's labels' mean."""
    y_std: float
    """The output's labels' standard deviation."""


class OutputModel(Free):
    """One output's part of a multi-output model: its draws, mode, output transform,
    diagnostics and accuracy."""

    samples: Draws
    """The output's posterior draws."""
    acquisition_samples: Draws
    """Its thinned draws."""
    mode: ModeDraw
    """Its posterior-mode GP."""
    transform: OutputTransform
    """How the output is standardized."""
    diagnostics: dict[str, Any]
    """Its refit's diagnostics."""


class InputTransform(Free):
    """How the inputs are scaled to the unit cube."""

    lower: list[float]
    """Each input's lower bound (a choice: 0)."""
    upper: list[float]
    """Each input's upper bound (a choice: its number of values - 1)."""


class MultiModel(Free):
    """A multi-output campaign's model: each output's (``outputs``, by name), the inputs'
    transform, and the refit's diagnostics over all outputs."""

    version: int
    """The model's version."""
    n_labeled: int
    """Labels the model saw."""
    outputs: dict[str, OutputModel]
    """Each output's model, by name."""
    transform: InputTransform
    """How the inputs are scaled."""
    diagnostics: dict[str, Any]
    """The refit's diagnostics over all outputs (largest R-hat, smallest ESS, all divergences)."""


class CampaignRef(Body):
    """The campaign a model came from."""

    id: str
    """The campaign's id."""
    name: str
    """The campaign's name."""


class LabeledData(Body):
    """The labels a model saw, original units; ``noise``: each label's known noise variance,
    only when the labels carry it."""

    x: list[list[Value]]
    """The labeled points."""
    y: list[float] | list[dict[str, float]]
    """Their labels, original units (objects with several outputs)."""
    noise: list[float] | list[dict[str, float]] | None = None
    """Their known noise variances, when the labels carry them."""


class MetamodelExport(Free):
    """``GET /campaigns/{id}/model/export``: a model with everything it needs to predict without
    the service (the SDK's ``clients.metamodel.Metamodel`` loads it): the draws, the mode, the
    transforms and the labeled data it saw. ``format_version`` changes when a reader must."""

    format: Literal["fbgp-al-metamodel"]
    """`fbgp-al-metamodel`."""
    format_version: int
    """1 for one output (2: several); changes when a reader must."""
    campaign: CampaignRef
    """The campaign it came from."""
    version: int
    """The model's version."""
    n_labeled: int
    """Labels the model saw."""
    inputs: list[dict[str, Any]]
    """The campaign's inputs, as declared."""
    kernel: Literal["rbf-ard"]
    """`rbf-ard`: squared exponential with one lengthscale per feature, unit output scale."""
    transform: Transform
    """How inputs and outputs are scaled for the GP."""
    samples: Draws
    """All the posterior draws kept."""
    acquisition_samples: Draws
    """The thinned draws of the mixture."""
    mode: ModeDraw
    """The posterior-mode GP."""
    data: LabeledData
    """The labeled data the model saw."""
    diagnostics: dict[str, Any]
    """The refit's diagnostics."""
    exported_at: float
    """When it was exported, unix seconds."""


class ExportedOutput(Free):
    """One output's part of an exported model."""

    transform: OutputTransform
    """How the output is standardized."""
    samples: Draws
    """Its posterior draws."""
    acquisition_samples: Draws
    """Its thinned draws."""
    mode: ModeDraw
    """Its posterior-mode GP."""


class MultiMetamodelExport(Free):
    """A multi-output campaign's exported model (``format_version`` 2): each output's draws,
    mode and output transform under ``outputs``; ``data.y`` (and ``noise``) objects
    ``{name: value}``."""

    format: Literal["fbgp-al-metamodel"]
    """`fbgp-al-metamodel`."""
    format_version: Literal[2]
    """2: several outputs."""
    campaign: CampaignRef
    """The campaign it came from."""
    version: int
    """The model's version."""
    n_labeled: int
    """Labels the model saw."""
    inputs: list[dict[str, Any]]
    """The campaign's inputs, as declared."""
    kernel: Literal["rbf-ard"]
    """`rbf-ard`."""
    transform: InputTransform
    """How the inputs are scaled."""
    outputs: dict[str, ExportedOutput]
    """Each output's draws, mode and transform, by name."""
    data: LabeledData
    """The labeled data the model saw (`y` objects)."""
    diagnostics: dict[str, Any]
    """The refit's diagnostics."""
    exported_at: float
    """When it was exported, unix seconds."""


class HistoryEvent(Free):
    """One model stored (``model``), refit failed (``refit_failed``), ``evaluate`` call, run
    failed (``run_failed``: ``ticket``, ``x``, ``reason``) or run abandoned
    (``run_abandoned``)."""

    event: str
    """`model`, `refit_failed`, `evaluate`, `run_failed`, `run_abandoned`, `stopped` or
    `resumed`."""
    at: float
    """When, unix seconds."""


class Prediction(Free):
    """Predictions at the points, original units, one entry per point."""

    mean: list[float]
    """The posterior-mode GP's mean of y."""
    variance: list[float]
    """Its variance of y, noise included (with known noise: the nugget; add a new point's own noise
    yourself)."""
    mixture_mean: list[float]
    """The mean of the equal-weight mixture of the acquisition draws' GPs."""
    mixture_variance: list[float]
    """The mixture's variance of y: the draws' mean variance plus the variance of their means."""
    model_version: int
    """The model that answered."""


class OutputPrediction(Free):
    """One output's predictions, original units."""

    mean: list[float]
    """The posterior-mode GP's mean of y."""
    variance: list[float]
    """Its variance of y, noise included."""
    mixture_mean: list[float]
    """The mixture's mean."""
    mixture_variance: list[float]
    """The mixture's variance."""


class MultiPrediction(Free):
    """Predictions of a campaign with several outputs."""

    outputs: dict[str, OutputPrediction]
    """Each output's predictions, by name."""
    model_version: int
    """The model that answered."""


class AcquisitionValues(Free):
    """The acquisition's scores at the points (higher: chosen first)."""

    values: list[float]
    """One score per point, in standardized units (several outputs: the weighted sum)."""
    model_version: int
    """The model that answered."""


class Evaluation(Free):
    """The model's metrics on a test set."""

    nlml: float
    """Negative log marginal likelihood of the test labels under the mode GP's joint predictive,
    per point, standardized units."""
    rmse: float
    """RMSE of the mode GP's mean against the test labels, in the output's units."""
    nlpd_mixture: float
    """Mean negative log predictive density of the test labels under the mixture, standardized
    units."""
    # the test NLML as the paper's code computes it (noise counted twice, the mode's log prior)
    nlml_paper: float | None = None
    """The test NLML as the paper's code computes it (noise counted twice, the mode's log prior
    included)."""
    model_version: int
    """The model that answered."""


class OutputEvaluation(Free):
    """One output's metrics on the test set."""

    nlml: float
    """Negative log marginal likelihood per point, standardized units."""
    rmse: float
    """RMSE of the mode GP's mean, in the output's units."""
    nlpd_mixture: float
    """Mean negative log predictive density under the mixture, standardized units."""
    nlml_paper: float | None = None
    """The test NLML as the paper's code computes it."""


class MultiEvaluation(Free):
    """Metrics of a campaign with several outputs."""

    outputs: dict[str, OutputEvaluation]
    """Each output's metrics, by name."""
    model_version: int
    """The model that answered."""


class Health(Body):
    """The process runs."""

    status: Literal["ok"]
    """`ok`."""


class Readiness(Body):
    """Whether the service can serve campaigns."""

    ready: bool
    """Redis reachable and a worker registered."""
    workers: int | None = None
    """Workers registered."""
    detail: str | None = None
    """What is missing, when not ready."""


class Points(Strict):
    """Points at which to predict."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"x": [[0.5, 2, "steel"], [0.9, 1, "titanium"]]}]}
    )

    x: list[Point] = Field(min_length=1, max_length=100_000)
    """The points, one value per input each, in the inputs' order (within the declared bounds)."""


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
    [values]}` columns; original units."""
    noise: NoiseColumn | NoiseColumns | None = None
    """Their known noise variances, shaped as `y` (campaigns with known noise only)."""

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
    """Points to score, and the acquisition to score them with."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"x": [[0.5, 2, "steel"], [0.9, 1, "titanium"]], "acquisition": "b-qbc"}]
        }
    )

    acquisition: Acquisition | None = None
    """The acquisition (default: the campaign's)."""


def check_points(points: list[list], inputs: list[dict]) -> list[list]:
    """The points with each coordinate as its input keeps it (a float, an int, a choice's
    value); ValueError unless every point has the campaign's dimension and each value is one
    of its input's (a number within its bounds, an integer, one of a choice's values)."""
    return _canonical(points, space_of(inputs), "point")


class Problem(Body):
    """An error, as ``application/problem+json`` (RFC 9457)."""

    type: str = "about:blank"
    """A URI naming the kind of error (`about:blank`)."""
    title: str
    """The status code's phrase."""
    status: int
    """The HTTP status code."""
    detail: str
    """What went wrong, for people."""
    errors: list[dict] | None = None
    """For a validation error: each invalid field, with its location and message."""


def problem_responses(*codes: int) -> dict:
    """OpenAPI ``responses`` for these error codes, each a :class:`Problem`."""
    schema = Problem.model_json_schema()
    return {code: {"description": HTTPStatus(code).phrase,
                   "content": {"application/problem+json": {"schema": schema}}}
            for code in codes}  # fmt: skip
