"""What :class:`~clients.client.FbgpClient` answers: one frozen dataclass per kind of answer
of the HTTP API (a campaign's status, a point to label, a label stored, a model, test metrics,
...), each holding the fields the server sent."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class CampaignStatus:
    """``GET /campaigns/{id}``; ``raw`` keeps every field the server sent."""

    id: str
    state: str  # design | active | failing | stalled | done | failed
    n_labeled: int
    n_pending: int
    max_labels: int
    model_version: int | None
    last_error: str | None
    refit: str | None = None  # idle | queued | running
    n_failed: int = 0  # runs reported failed
    n_abandoned: int = 0
    failing: bool = False  # more failed runs than max_failures: /next hands out no point
    n_forgiven: int = 0  # failed runs forgiven by the owner's retries
    stalled: bool = False  # runs failed and no point is left to offer
    # done by its stopping rule: {rule, value, target, version, at}; None otherwise
    stopped_by: dict | None = None
    team: str | None = None  # the team whose token created it
    inputs: list[dict] = field(default_factory=list, repr=False, compare=False)  # as declared
    # a multi-output campaign's outputs as declared ({name, weight, units}); None: one output
    outputs: list[dict] | None = field(default=None, repr=False, compare=False)
    raw: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict) -> CampaignStatus:
        return cls(
            id=data["id"],
            state=data["state"],
            n_labeled=data["n_labeled"],
            n_pending=data["n_pending"],
            max_labels=data["max_labels"],
            model_version=data["model_version"],
            last_error=data.get("last_error"),
            refit=data.get("refit"),
            n_failed=data.get("n_failed", 0),
            n_abandoned=data.get("n_abandoned", 0),
            failing=data.get("failing", False),
            n_forgiven=data.get("n_forgiven", 0),
            stalled=data.get("stalled", False),
            stopped_by=data.get("stopped_by"),
            inputs=data.get("inputs", []),
            outputs=data.get("outputs"),
            team=data.get("team"),
            raw=data,
        )


@dataclass(frozen=True)
class Campaign:
    """``POST /campaigns``: the stored spec (the body with defaults, ``id``, ``seed``, ...) and
    the campaign's two access tokens, shown once. ``token`` is its simulators' (give it to
    them): it gets points, posts labels, reports failed or abandoned runs, renews leases and
    reads the campaign's status. ``owner_token`` opens everything of this campaign (delete,
    import and export, the model and its answers, the pages); keep it."""

    id: str
    spec: dict
    status: CampaignStatus
    token: str | None = field(default=None, repr=False)
    owner_token: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class NextPoint:
    """A point to label: post its label with ``ticket`` before ``expires_at`` (unix seconds)."""

    ticket: str
    x: list  # one value per input: a float, an int input's integer, a choice input's value
    expires_at: float
    model_version: int | None
    fidelity: str | None = None  # a campaign with fidelities: the level to run x at


@dataclass(frozen=True)
class Pending:
    """``/next`` answered 202: ask again after ``retry_after`` seconds."""

    retry_after: float
    detail: str


@dataclass(frozen=True)
class LabelResult:
    """``created`` is False when the same label had been stored before (200, not 201)."""

    ticket: str
    y: float | dict  # with several outputs, {name: value}
    n_labeled: int
    created: bool
    noise: float | dict | None = None  # the label's noise variance, in a campaign with known noise

    @classmethod
    def from_json(cls, data: dict, created: bool) -> LabelResult:
        return cls(data["ticket"], data["y"], data["n_labeled"], created, data.get("noise"))


@dataclass(frozen=True)
class RunReport:
    """``/fail`` or ``/abandon``: ``status`` ``failed`` or ``abandoned``; ``count`` the
    campaign's failed (or abandoned) runs; ``created`` False for the same report again."""

    ticket: str
    status: str
    count: int
    created: bool


@dataclass(frozen=True)
class Observations:
    """Labeled data in original units: ``x`` ``[n][d]``, ``y`` ``[n]``; ``failures`` the runs
    reported failed, the latest ``FBGP_KEEP_RUNS`` of them, ``{x, ticket, reason, at}`` each (no
    model sees them; the status's ``n_failed`` counts them all); ``noise`` ``[n]``
    the labels' noise variances in a campaign with known noise (else None); ``fidelity``
    ``[n]`` the labels' levels in a campaign with fidelities (else None)."""

    x: list[list]
    y: list[float]
    failures: list[dict] = field(default_factory=list)
    noise: list[float] | None = None
    fidelity: list[str] | None = None


@dataclass(frozen=True)
class Model:
    """``GET /campaigns/{id}/model``; the dicts are as the manual's HTTP API reference
    (docs/reference/http.md) gives them."""

    version: int
    n_labeled: int
    samples: dict | None  # None with several outputs: each one's are in ``outputs``
    acquisition_samples: dict | None
    mode: dict | None
    transform: dict
    diagnostics: dict
    # estimates without a test set (LOO RMSE, integrated variances; README); empty from servers
    # before them
    accuracy: dict = field(default_factory=dict)
    # the lengthscales' columns by name (an input, or ``name=value`` of a choice input's value);
    # None for a campaign of float inputs, whose columns are its inputs
    features: list[str] | None = None
    # a multi-output campaign's outputs by name, each a dict with its samples,
    # acquisition_samples, mode, transform (y_mean, y_std), diagnostics and accuracy
    outputs: dict[str, dict] | None = None
    # where runs had failed: the failure model (its classifier, ``min_success``, the runs it
    # was fitted on), one for all outputs; None without failed runs or with ``"none"``
    failures: dict | None = None

    @classmethod
    def from_json(cls, data: dict) -> Model:
        fields = {k: data[k] for k in cls.__dataclass_fields__ if k in data and k != "accuracy"}
        for k in ("samples", "acquisition_samples", "mode"):
            fields.setdefault(k, None)
        return cls(**fields, accuracy=data.get("accuracy") or {})

    @property
    def max_rhat(self) -> float:
        """The largest split R-hat over the hyperparameters (NaN where no chain sampled them:
        a large campaign's Laplace mixture, whose ``diagnostics`` hold its Pareto ``khat``)."""
        value = self.diagnostics.get("max_rhat")
        return math.nan if value is None else float(value)

    @property
    def min_ess(self) -> float:
        """The smallest bulk effective sample size over the hyperparameters (NaN as
        :attr:`max_rhat`)."""
        value = self.diagnostics.get("min_ess_bulk")
        return math.nan if value is None else float(value)

    @property
    def divergences(self) -> int:
        return int(self.diagnostics.get("divergences", 0))

    @property
    def refit_seconds(self) -> float:
        return float(self.diagnostics.get("refit_seconds", math.nan))


@dataclass(frozen=True)
class Evaluation:
    """``/evaluate``: ``nlml`` (per point, standardized), ``rmse`` against the y passed
    (original units), ``nlpd_mixture`` (standardized); ``model_version`` where the server says;
    ``nlml_paper``: the test NLML as the paper's code computes it (standardized), None where
    the server does not send it; ``nlml_y`` and ``nlpd_mixture_y``: ``nlml`` and
    ``nlpd_mixture`` as densities of y in its own units (a log output's lognormal ones), None
    where the server does not send them."""

    nlml: float
    rmse: float
    nlpd_mixture: float
    model_version: int | None = None
    nlml_paper: float | None = None
    nlml_y: float | None = None
    nlpd_mixture_y: float | None = None

    @classmethod
    def from_json(cls, e: dict, model_version: int | None) -> Evaluation:
        """One output's metrics as ``/evaluate`` answers them."""
        return cls(
            e["nlml"],
            e["rmse"],
            e["nlpd_mixture"],
            model_version,
            e.get("nlml_paper"),
            e.get("nlml_y"),
            e.get("nlpd_mixture_y"),
        )


@dataclass(frozen=True)
class Readiness:
    """``/readyz``: ``ready`` with Redis reachable and taking writes and at least one worker;
    ``status`` ``ready``, ``degraded`` (ready, but Redis's memory or disk is nearly full:
    ``detail`` says which) or ``unavailable``."""

    ready: bool
    workers: int
    detail: str | None
    status: str = "ready"
