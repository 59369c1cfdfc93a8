"""A campaign: its settings as posted (checked against each other), as stored and answered
with its tokens, and its status."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, ConfigDict, Field, model_serializer, model_validator

from fbgp_al.service.names import look_alikes, visible
from fbgp_al.service.schemas.constraints import MAX_CONSTRAINTS, ConstraintText, feasible_pool
from fbgp_al.service.schemas.failures import FailureModel
from fbgp_al.service.schemas.fidelities import MAX_FIDELITIES, FidelitySpec, check_fidelities
from fbgp_al.service.schemas.fields import Acquisition, Body, Finite, Strict
from fbgp_al.service.schemas.inputs import (
    MAX_POOL,
    ContinuousPoolSpec,
    GridPoolSpec,
    InitialDesign,
    InputSpec,
    PointsPoolSpec,
    canonical_points,
    check_distinguishable,
    space_of,
)
from fbgp_al.service.schemas.mcmc import McmcSettings
from fbgp_al.service.schemas.outputs import KnownNoise, LearnedNoise, OutputSpec, OutputTransform
from fbgp_al.service.schemas.stop_rule import StoppedBy, StopRule, check_stop
from fbgp_al.worker.vocabulary import box
from fbgp_al.worker.vocabulary.constraints import ConstraintError, Constraints
from fbgp_al.worker.vocabulary.defaults import (
    DEFAULT_ACQUISITION,
    MAX_OUTPUTS,
    MAX_STARTS,
    POOL_SUBSAMPLE,
    SEARCH_STARTS,
)
from fbgp_al.worker.vocabulary.fidelities import level_input


class SearchSettings(Strict):
    """How a refit looks beyond its candidates."""

    polish: bool | None = None
    """Polish the best candidates (absent or `null`: only a `continuous` pool's refits do):
    from each of the `starts` best (by the acquisition, weighed by the failure model), L-BFGS-B
    climbs the acquisition (the starts side by side), averaged over the posterior's draws as
    the pool's scoring averages it (past 1,000 labels over fewer of them, evenly spaced, as many
    as 1.2 GB of factors hold), over the box in the float and log inputs (int and choice
    inputs held at the candidate's values; SLSQP where some constraints are linear
    inequalities, and a point outside the others pulled back inside). The best point reached
    is handed out: a point of the box, not of the pool (its ticket has no pool index), never
    worse by the acquisition than the pool's best, never a labeled point unless repeats are
    allowed. A parallel campaign's batch is polished pick by pick. Not with `random`, and only
    where some input is a float or log input."""
    starts: int = Field(default=SEARCH_STARTS, ge=1, le=MAX_STARTS)
    """How many of the best candidates each refit polishes from (1 to 64)."""


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
    pool: GridPoolSpec | PointsPoolSpec | ContinuousPoolSpec = Field(discriminator="type")
    """The candidate points: a `grid` over the inputs, an explicit list of `points`, or
    `continuous`, the box itself (a fresh sample of it each refit, polished)."""
    constraints: list[ConstraintText] = Field(default=[], max_length=MAX_CONSTRAINTS)
    """Where the simulator can run: texts that must all hold at a point (`"thickness >= 4 or
    load <= 8"`, `"material != 'al' or load <= 5"`): linear inequalities (`<`, `<=`, `>`, `>=`,
    `==`, `!=`) over float, int and log inputs in their own units, a choice input compared with
    its values (`==`, `!=`, `in ('steel', 'al')`), joined by `and`, `or`, `not` and parentheses
    (a name that is no identifier in backquotes). A point on a boundary satisfies `<=` and `>=`,
    not `<` or `>`. No point outside is in the design or handed out; an explicit pool's points
    outside are dropped. A constraint that does not parse, names an unknown input, or leaves no
    point (too few for the design or `max_labels`) is a 422 that says which."""
    pool_subsample: int = Field(default=POOL_SUBSAMPLE, ge=1, le=1_000_000)
    """Candidates scored per refit: a fresh random subset of a larger pool (of a `continuous`
    pool, a fresh Sobol sample of the box)."""
    acquisition: Acquisition | Literal["ivr"] = DEFAULT_ACQUISITION
    """How the next point is chosen: `qb-mgp`, `b-qbc` (the paper's), `alm`, `b-alm`, `bald`,
    `random`, or `bald-code` (alias `bald-std`: BALD as the paper's code computes it). With
    `fidelities`: `ivr` (the default there: the top level's integrated predictive variance that
    a run removes, per unit of its level's cost), or `qb-mgp`, `b-qbc`, `b-alm` at the top
    level with the level chosen by `ivr`."""
    search: SearchSettings | None = None
    """Beyond the candidates: `{"polish": true, "starts": 5}` climbs the acquisition over the box
    from the best of them and hands out the best point reached (absent: the pool's best)."""
    initial_design: InitialDesign = InitialDesign()
    """The first labels, before any model chooses."""
    max_labels: int = Field(ge=1, le=1_000_000)
    """The campaign is done after this many labels (at most `FBGP_LIMIT_LABELS`, 5,000 by
    default)."""
    fidelities: list[FidelitySpec] | None = Field(
        default=None, min_length=2, max_length=MAX_FIDELITIES
    )
    """The simulator's fidelity levels, lowest (cheapest) first, each `{"name", "cost"}` with
    costs strictly increasing; the last is the level the metamodel is for. `/next` then says
    the level to run each point at (`fidelity`), a label is of its ticket's level, an import
    gives each point's level, and the model is the autoregressive multi-fidelity GP (each level
    `rho` times the one below plus a GP of its own). An explicit pool's points each end with a
    level's name. Absent: one fidelity."""
    max_cost: Finite | None = Field(default=None, gt=0)
    """With `fidelities`: the campaign is also done once the labels' costs add up to this
    (tickets out when it is reached may still be labeled, and may take it past)."""
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
    failures: FailureModel = FailureModel()
    """The failure model: a GP classifier of the runs' success that steers the acquisition away
    from where runs failed (`{"model": "classifier", "min_success": 0.1}`), or `{"model":
    "none"}`."""
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
    # "log": the GP models log y (a positive output over orders of magnitude; labels > 0)
    transform: OutputTransform = "none"
    """`none` (the default): the GP models y as it is; `log`: y is positive and the GP models
    log y, standardized (an output over orders of magnitude: its predictions stay positive), and
    a label, imported value or test value <= 0 is a 422. Labels and answers stay in y's units:
    `/predict` gives the lognormal's mean and variance and its median and 95% interval. Known
    noise variances of y are taken to log y by the delta method, `noise / y^2`. With several
    outputs each declares its own (`{"name": ..., "transform": "log"}` in `outputs`)."""

    @model_serializer(mode="wrap")
    def _learned_noise_unsaid(self, handler):
        """A campaign that learns its noise (the default) is written as before the option
        existed: without ``noise``."""
        data = handler(self)
        if isinstance(data, dict) and data.get("noise") == {"type": "learned"}:
            del data["noise"]
        if isinstance(data, dict) and data.get("outputs", ()) is None:
            del data["outputs"]
        if isinstance(data, dict) and data.get("constraints", None) == []:
            del data["constraints"]  # as campaigns created before constraints existed
        if isinstance(data, dict) and data.get("search", ()) is None:
            del data["search"]  # as campaigns created before the search existed
        if isinstance(data, dict) and data.get("transform") == "none":
            del data["transform"]  # as campaigns created before output transforms existed
        for key in ("fidelities", "max_cost"):  # as campaigns created before fidelities existed
            if isinstance(data, dict) and key in data and data[key] is None:
                del data[key]
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
                    "constraints": ["layers >= 2 or load <= 0.8"],
                    "max_labels": 30,
                    "mode": "parallel",
                    "max_pending": 4,
                    "stop": {"loo_rmse_relative": 0.05},
                }
            ]
        }
    )

    @model_validator(mode="before")
    @classmethod
    def _one_output_unnamed(cls, data):
        """``outputs`` of fewer than two: what to send instead, not a list's length."""
        outputs = data.get("outputs") if isinstance(data, dict) else None
        if isinstance(outputs, list) and len(outputs) < 2:
            raise ValueError(
                f"outputs: {len(outputs)} named; name 2 to {MAX_OUTPUTS} outputs, or leave "
                "`outputs` out for a campaign of one output, whose labels' y is a number "
                "(fbgp-al run reads it from a last line that is a number alone)"
            )
        return data

    @model_validator(mode="after")
    def _consistent(self):
        names = [i.name for i in self.inputs]
        if len(set(names)) != len(names):
            raise ValueError("input names must be distinct")
        for spec in self.inputs:
            check_distinguishable(spec)
        if self.outputs is not None:
            if self.transform != "none":
                raise ValueError(
                    "transform: a campaign with several outputs declares each "
                    'output\'s own, {"name": ..., "transform": "log"} in '
                    "outputs"
                )
            outputs = [o.name for o in self.outputs]
            if len(set(outputs)) != len(outputs):
                raise ValueError("outputs: their names must be distinct")
            names += outputs
        same = look_alikes(names)
        for spec in self.inputs:
            same = same or look_alikes([v for v in spec.values or () if isinstance(v, str)])
        if same:
            raise ValueError(
                f"{same[0]!r} and {same[1]!r} look alike (Latin beside Greek or "
                "Cyrillic letters): name them apart"
            )
        check_fidelities(self)
        if self.max_labels < self.initial_design.size:
            raise ValueError(
                f"max_labels ({self.max_labels}) is smaller than the initial design "
                f"({self.initial_design.size})"
            )
        check_stop(self.stop, self.max_labels)
        inputs = list(self.inputs)
        if self.fidelities is not None:  # the level is the points' last coordinate
            inputs.append(InputSpec(**level_input([f.model_dump() for f in self.fidelities])))
        space = space_of(inputs)
        if self.fidelities is not None and (
            isinstance(self.pool, ContinuousPoolSpec)
            or (self.search is not None and self.search.polish)
        ):
            raise ValueError(
                "fidelities: a campaign with fidelities chooses among its pool's points at each "
                "level; a continuous pool and search.polish are for campaigns of one fidelity"
            )
        if self.search is not None and self.search.polish:
            if self.acquisition == "random":
                raise ValueError("search.polish: random has no gradient to climb; name another")
            if all(i.type in ("int", "choice") for i in space.inputs):
                raise ValueError("search.polish moves float and log inputs; this campaign has none")
            if isinstance(self.pool, PointsPoolSpec):
                raise ValueError(
                    "search.polish: an explicit pool lists the points that may be run, and "
                    "polishing hands out others (use a grid or a continuous pool)"
                )
        features = space.feature_names
        if len(set(features)) != len(features):
            same = next(f for f in features if features.count(f) > 1)
            raise ValueError(
                f"two of the model's features read {same!r} (a choice's value "
                "reads '<input>=<value>'); rename an input"
            )
        if isinstance(self.pool, ContinuousPoolSpec):
            check_box(self, space)
            return self
        if isinstance(self.pool, GridPoolSpec):
            size = space.grid_size(self.pool.points_per_dim)
            if size > MAX_POOL:
                shape = space.grid_shape(self.pool.points_per_dim)
                raise ValueError(f"the grid has {shape} points, more than 2^62: too many to index")
        else:
            size = len(self.pool.points)
            self.pool.points = canonical_points(self.pool.points, space, "pool point")
            if len({tuple(p) for p in self.pool.points}) < size:
                why = " (an int input's values are integers)" if space.typed else ""
                raise ValueError(f"the pool's points must be distinct{why}")
        how = ""
        if self.constraints:  # only their points count; an explicit pool keeps only them
            inputs = [i.model_dump() for i in inputs]
            if isinstance(self.pool, GridPoolSpec):
                size, _, how = feasible_pool(
                    self.constraints, space, inputs, self.pool.model_dump(), None
                )
            else:
                size, self.pool.points, how = feasible_pool(
                    self.constraints, space, inputs, None, self.pool.points
                )
        if size < self.initial_design.size:
            raise ValueError(
                f"the pool ({size:,} points{how}) is smaller than the initial "
                f"design ({self.initial_design.size})"
            )
        if not self.allow_repeats and size < self.max_labels:
            raise ValueError(
                f"max_labels ({self.max_labels}) exceeds the pool ({size:,} points{how}) and "
                "allow_repeats is false"
            )
        return self


def check_box(campaign: CampaignCreate, space) -> None:
    """ValueError unless a continuous pool can serve the campaign: a float or log input to
    move, and constraints (if any) that leave room for the initial design in the box."""
    if all(i.type in ("int", "choice") for i in space.inputs):
        raise ValueError(
            "a continuous pool moves float and log inputs; this campaign has none (use a grid)"
        )
    if campaign.constraints:
        try:
            constraints = Constraints.of(campaign.constraints, space)
        except ConstraintError as error:
            raise ValueError(str(error)) from None
        box.design_points(space, campaign.initial_design.size, 0, campaign.seed, constraints)


class CampaignStatus(Body):
    """``GET /campaigns/{id}``: where the campaign stands."""

    id: str
    """The campaign's id."""
    name: str
    """Its name."""
    team: str | None = None  # the team whose token created it (None: the service token's)
    """The team whose token created it (`null`: the service token's)."""
    state: Literal["design", "active", "failing", "stalled", "done", "failed"]
    """`design` (the initial design is being labeled), `active`, `failing` (more runs failed
    than `max_failures`: no point is handed out until the owner's `POST .../retry`), `stalled`
    (runs failed and no point is left to offer: every one left failed for good or, with the
    failure model, has a probability of success below `min_success`), `done` (max_labels, its
    stopping rule, or the pool used up) or `failed` (refits kept failing: see `last_error`, then
    `POST .../retry`)."""
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
    outputs: list[OutputSpec] | None = None
    """A multi-output campaign's outputs (names, weights, units); `null`: one output."""
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
    """Done by its stopping rule: which target was met (`/next` answers 410); `max_cost` when
    the labels' cost reached the campaign's `max_cost`."""
    fidelities: list[FidelitySpec] | None = None
    """A multi-fidelity campaign's levels, lowest first (`null`: one fidelity)."""
    max_cost: float | None = None
    """Its budget in cost, if any."""
    cost_spent: float | None = None
    """The cost of its labels: the sum of their levels' costs."""
    labels_per_fidelity: dict[str, int] | None = None
    """Its labels at each level, by name."""


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
