"""A campaign's model as answered: its posterior draws, mode, transforms and diagnostics (of one
output, or of each of several), the model exported to predict without the service, and the
campaign's history of models and runs."""

from __future__ import annotations

from typing import Any, Literal

from fbgp_al.service.schemas.fields import Body, Free, Value
from fbgp_al.worker.vocabulary.defaults import WEIGHT_QUANTILE


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
    ``k - 1``; typed ``inputs`` listed), outputs standardized by ``y_mean`` and ``y_std`` (on
    the log scale where ``y_transform`` is ``log``)."""

    lower: list[float]
    """Each input's lower bound (a choice: 0)."""
    upper: list[float]
    """Each input's upper bound (a choice: its number of values - 1)."""
    y_mean: float
    """The labels' mean: y is standardized as (y - y_mean) / y_std (a log output: log y's)."""
    y_std: float
    """The labels' standard deviation (1 for constant labels; a log output: log y's)."""
    y_transform: Literal["log"] | None = None
    """`log`: the output is modeled on the log scale, as (log y - y_mean) / y_std, and answers
    back in y's units are lognormal (absent: y modeled as it is)."""


class FailureModelBody(Free):
    """The failure model a refit fitted (once a run had failed, unless the campaign's `failures`
    is `none`): a GP classifier of the runs' success over the GP's features, and what it was
    fitted on."""

    model: dict[str, Any]
    """The classifier: `kind` `classifier` (probit; EP's sites `tau`, `nu` at the runs `u`, unit
    cube, with `success` 1 or 0, and its `lengthscale`, `variance`, `bias`) or `constant` (every
    run failed: one probability `p` everywhere)."""
    min_success: float
    """Candidates below this probability of success were left out of the ranking."""
    n_successes: int
    """Labels it counted as successes."""
    n_failures: int
    """Failed runs it counted (those kept, but for those a retry said to forget)."""
    n_fitted: int
    """Runs it was fitted on (at most 200: every failure, then the successes nearest them and a
    seeded draw of the others)."""
    fit_seconds: float
    """Seconds its fit took."""
    excluded: int = 0
    """The refit's candidates left out for a probability of success below `min_success`."""
    weight_quantile: float = WEIGHT_QUANTILE
    """Each other candidate's acquisition score was weighed by this quantile of its chance of
    success under the classifier's posterior (the campaign's `failures.weight_quantile`)."""
    bracket: float = 0.0
    """A failure and a success at most this far apart bracketed the region's border (the
    campaign's `failures.bracket`; 0: none did, as in models stored before the option)."""
    bracketed: int = 0
    """The refit's candidates between such a failure and success, weighed by their median chance
    of success."""


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
    """The refit's diagnostics: `method` (`nuts`, or `laplace` past `mcmc.laplace_from`
    labels); by NUTS, the largest R-hat, smallest bulk ESS, divergences, seconds, warm start and
    target met; by the Laplace mixture, its Pareto `khat` against `khat_limit`, `widened` (1, or
    1.5 when the first mixture's `khat` was above the limit and a wider one was drawn),
    `importance_ess`, `modes`, seconds and `warm_start` (`warm`, `cold`, or `warm+cold` when its
    modes were searched for again beside the warm starts), with `max_rhat` and `min_ess_bulk`
    null (no chain drew it)."""
    failures: FailureModelBody | None = None
    """The failure model, when runs have failed (absent before the first failure)."""


class OutputTransform(Free):
    """How an output is standardized."""

    y_mean: float
    """The output's labels' mean (a log output: log y's)."""
    y_std: float
    """The output's labels' standard deviation (a log output: log y's)."""
    y_transform: Literal["log"] | None = None
    """`log`: the output is modeled on the log scale (absent: as it is)."""


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


class Rho(Body):
    """The posterior of one ``rho``: how a level follows the level below (``f_upper = rho
    f_lower + delta``)."""

    mean: float
    """Its posterior mean."""
    sd: float
    """Its posterior standard deviation."""
    q05: float
    """Its 5% quantile."""
    median: float
    """Its median."""
    q95: float
    """Its 95% quantile."""


class FidelityBody(Free):
    """A multi-fidelity model's own part: the levels, what was run at each, each learned
    ``rho``, and the kept draws of its hyperparameters that its answers mix."""

    levels: list[str]
    """The levels' names, lowest first (the last: the top level, the one the metamodel is
    for)."""
    costs: list[float]
    """Each level's cost."""
    labels_per_level: dict[str, int]
    """The labels the model saw at each level, by name."""
    cost_spent: float
    """Their cost: the sum of their levels' costs."""
    rho: list[Rho]
    """Each `rho`, from the lowest level to the next up: the learned factor between
    neighbouring levels."""
    names: list[str]
    """The hyperparameters' names, in the order of each draw of `theta`: each level's log
    lengthscales (`lengthscale_<level>_<feature>`, unit-cube units), each discrepancy's log
    variance (`variance_<level>`), each `rho_<level>`, the lowest level's log noise (`noise`,
    less `noise_floor`) and each other level's log ratio to it (`noise_ratio_<level>`)."""
    noise_floor: float
    """The noise variances' floor, standardized units."""
    theta: list[list[float]]
    """The kept draws of the hyperparameters (unconstrained, as `names` says)."""
    mode: int
    """The draw of `theta` of the highest posterior density (the predictions' `mean` and
    `variance`)."""


class FidelityModel(Free):
    """A model of a campaign with fidelities: the autoregressive multi-fidelity GP's draws and
    each learned ``rho`` (``fidelity``), the transforms, the refit's diagnostics and the top
    level's ``accuracy``."""

    version: int
    """The model's version."""
    n_labeled: int
    """Labels the model saw."""
    fidelity: FidelityBody
    """The levels, the labels and cost at each, each `rho`, and the draws."""
    transform: Transform
    """How inputs and outputs are scaled (the labels of all levels standardized together)."""
    diagnostics: dict[str, Any]
    """The refit's diagnostics: R-hat and bulk ESS per hyperparameter, their largest and
    smallest, divergences, seconds and warm start."""
    failures: FailureModelBody | None = None
    """The failure model, when runs have failed (over the points and their levels)."""


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
    failures: FailureModelBody | None = None
    """The failure model (one for all outputs: a run answers or fails for all), when runs have
    failed."""


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
    """1 for one output (2: several; 3: either, with an output modeled on the log scale, which
    readers that predate output transforms refuse); changes when a reader must."""
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
    failures: FailureModelBody | None = None
    """The failure model, when runs had failed: the `Metamodel` gives `p_success` from it."""
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
    """A multi-output campaign's exported model (``format_version`` 2, or 3 with an output
    modeled on the log scale): each output's draws, mode and output transform under
    ``outputs``; ``data.y`` (and ``noise``) objects ``{name: value}``."""

    format: Literal["fbgp-al-metamodel"]
    """`fbgp-al-metamodel`."""
    format_version: Literal[2, 3]
    """2: several outputs (3: one of them modeled on the log scale)."""
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
    failures: FailureModelBody | None = None
    """The failure model, when runs had failed: the `Metamodel` gives `p_success` from it."""
    exported_at: float
    """When it was exported, unix seconds."""


class FidelityMetamodelExport(Free):
    """A campaign with fidelities' exported model (``format_version`` 4): the multi-fidelity
    GP's draws (``fidelity``), the levels, the transforms and the labeled data with each
    label's level (``data.fidelity``); the SDK's ``Metamodel.load`` reads it as a
    ``FidelityMetamodel``, which predicts every level."""

    format: Literal["fbgp-al-metamodel"]
    """`fbgp-al-metamodel`."""
    format_version: Literal[4]
    """4: a campaign with fidelities."""
    campaign: CampaignRef
    """The campaign it came from."""
    version: int
    """The model's version."""
    n_labeled: int
    """Labels the model saw."""
    inputs: list[dict[str, Any]]
    """The campaign's inputs, as declared (the level apart)."""
    fidelities: list[dict[str, Any]]
    """The levels, lowest first, with their costs."""
    kernel: Literal["ar1-rbf-ard"]
    """`ar1-rbf-ard`: each level `rho` times the one below plus a GP of its own, ARD RBF
    kernels."""
    transform: Transform
    """How inputs and outputs are scaled."""
    fidelity: FidelityBody
    """The levels' model: each `rho`, the draws, the mode."""
    data: dict[str, Any]
    """The labeled data the model saw: `x`, `y` and each label's level, `fidelity`."""
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
