"""The model and its answers: ``/model``, ``/history``, and ``/predict``, ``/acquisition``,
``/evaluate``, which are short jobs on the high-priority queue that a worker runs while the
request waits."""

from __future__ import annotations

import time
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response

from fbgp_al.service import limits
from fbgp_al.service.checks import spec_with_points
from fbgp_al.service.deps import Authorized, CampaignId, RedisDep, SettingsDep, StoreDep
from fbgp_al.service.middleware import OffTheLoop
from fbgp_al.service.refusals import NotFound, Unprocessable, unprocessable_values
from fbgp_al.service.routes.model_jobs import run_job
from fbgp_al.service.schemas.labeling import Observations
from fbgp_al.service.schemas.models import (
    FidelityMetamodelExport,
    FidelityModel,
    HistoryEvent,
    MetamodelExport,
    Model,
    MultiMetamodelExport,
    MultiModel,
)
from fbgp_al.service.schemas.predictions import (
    AcquisitionRequest,
    AcquisitionValues,
    Evaluation,
    MultiEvaluation,
    MultiPrediction,
    Points,
    Prediction,
)
from fbgp_al.service.schemas.problems import problem_responses
from fbgp_al.service.schemas.sensitivity import MultiSensitivity, Sensitivity
from fbgp_al.service.store import CampaignStore
from fbgp_al.worker.vocabulary import fidelities
from fbgp_al.worker.vocabulary.defaults import (
    ACQUISITIONS,
    FIDELITY_ACQUISITIONS,
    known_noise,
    output_names,
)
from fbgp_al.worker.vocabulary.values import LEARNED_NOISE, checked_rows

router = APIRouter(
    prefix="/campaigns/{campaign_id}",
    tags=["models"],
    dependencies=[Authorized],
    route_class=OffTheLoop,
)

# a model-based answer: 404 before the first model; 500 if the job failed; 429 and 503 ask
# again after Retry-After
MODEL_RESPONSES = problem_responses(404, 500, 429, 503)
MODEL_RESPONSES[429]["description"] = (
    "the campaign has as many model calls out as it may (FBGP_LIMIT_MODEL_CALLS): ask again "
    "after Retry-After"
)
MODEL_RESPONSES[503]["description"] = (
    "no worker answered in time, or all campaigns' model calls hold their share of the workers "
    "(FBGP_MODEL_CALL_SHARE), or Redis is out of reach or loading its data after a restart: "
    "ask again after Retry-After"
)


@router.get(
    "/model",
    response_model=Model | MultiModel | FidelityModel,
    response_model_exclude_unset=True,
    responses=problem_responses(404),
)
def model(campaign_id: CampaignId, store: StoreDep):
    """The latest model: its posterior draws, the thinned draws the acquisition uses, the
    mode GP, the transforms, the refit's diagnostics and `accuracy`; with several outputs,
    each output's under `outputs`; with fidelities, the multi-fidelity GP's under `fidelity`
    (each learned `rho`, the labels and cost at each level, the draws) and the top level's
    `accuracy`. 404 before the first model."""
    return store.models.latest(campaign_id)


EXPORT_FORMAT = "fbgp-al-metamodel"
EXPORT_FORMAT_VERSION = 1
EXPORT_FORMAT_VERSION_OUTPUTS = 2  # a multi-output campaign's document (``outputs``)
# either, with an output modeled on the log scale (``y_transform``): a reader that predates
# output transforms refuses it rather than read log y as y
EXPORT_FORMAT_VERSION_LOG = 3
EXPORT_FORMAT_VERSION_FIDELITIES = 4  # a campaign with fidelities' (``fidelity``)


def _export_levels(campaign_id, spec: dict, model: dict, data: dict, now: float) -> dict:
    """A campaign with fidelities' model as a document (``format_version`` 4): the declared
    inputs, the levels, the model's ``fidelity`` body, and the data with each label's level
    apart."""
    data["x"], data["fidelity"] = fidelities.split(spec, data["x"])
    document = {
        "format": EXPORT_FORMAT,
        "format_version": EXPORT_FORMAT_VERSION_FIDELITIES,
        "campaign": {"id": campaign_id, "name": spec["name"]},
        "version": model["version"],
        "n_labeled": model["n_labeled"],
        "inputs": fidelities.declared_inputs(spec),
        "fidelities": spec["fidelities"],
        "kernel": "ar1-rbf-ard",
        "transform": model["transform"],
        "fidelity": model["fidelity"],
        "data": data,
        "diagnostics": model.get("diagnostics", {}),
        "accuracy": model.get("accuracy"),
    }
    if "failures" in model:
        document["failures"] = model["failures"]
    return dict(document, exported_at=now)


def _logged(transforms) -> bool:
    """Whether any of these output transforms (of a model body) is ``log``."""
    return any(t.get("y_transform") == "log" for t in transforms)


def export_document(
    campaign_id: CampaignId, spec: dict, model: dict, labels: list[dict], now: float
) -> dict:
    """The stored ``model`` with what it needs to predict without the service: the campaign's
    inputs and the first ``n_labeled`` of its ``labels`` (the ones the model saw), with their
    known ``noise`` variances when any label carries one (0 for a label without)."""
    seen = labels[: model["n_labeled"]]
    data = {"x": [label["x"] for label in seen], "y": [label["y"] for label in seen]}
    if "fidelity" in model:
        return _export_levels(campaign_id, spec, model, data, now)
    if "outputs" in model:
        return _export_outputs(campaign_id, spec, model, seen, data, now)
    if any(label.get("noise") is not None for label in seen):
        data["noise"] = [float(label.get("noise") or 0.0) for label in seen]
    document = {
        "format": EXPORT_FORMAT,
        "format_version": (
            EXPORT_FORMAT_VERSION_LOG if _logged([model["transform"]]) else EXPORT_FORMAT_VERSION
        ),
        "campaign": {"id": campaign_id, "name": spec["name"]},
        "version": model["version"],
        "n_labeled": model["n_labeled"],
        "inputs": spec["inputs"],
        "kernel": "rbf-ard",
        "transform": model["transform"],
        "samples": model["samples"],
        "acquisition_samples": model["acquisition_samples"],
        "mode": model["mode"],
        "chains": model.get("chains"),
        "data": data,
        "diagnostics": model.get("diagnostics", {}),
    }
    if "accuracy" in model:
        document["accuracy"] = model["accuracy"]
    if "failures" in model:
        document["failures"] = model["failures"]
    document["exported_at"] = now
    return document


def _export_outputs(
    campaign_id: CampaignId, spec: dict, model: dict, seen: list[dict], data: dict, now: float
) -> dict:
    """A multi-output model's document (``format_version`` 2; 3 with a log output): the
    inputs' ``transform``, each output's draws, mode and ``transform`` under ``outputs``, and
    the labels with ``y`` (and ``noise``) objects ``{name: value}``."""
    names = output_names(spec)
    if any(label.get("noise") is not None for label in seen):
        data["noise"] = [label.get("noise") or dict.fromkeys(names, 0.0) for label in seen]
    keep = (
        "transform",
        "samples",
        "acquisition_samples",
        "mode",
        "chains",
        "diagnostics",
        "accuracy",
    )
    outputs = {
        name: {k: model["outputs"][name][k] for k in keep if k in model["outputs"][name]}
        for name in names
    }
    document = {
        "format": EXPORT_FORMAT,
        "format_version": (
            EXPORT_FORMAT_VERSION_LOG
            if _logged(o["transform"] for o in outputs.values())
            else EXPORT_FORMAT_VERSION_OUTPUTS
        ),
        "campaign": {"id": campaign_id, "name": spec["name"]},
        "version": model["version"],
        "n_labeled": model["n_labeled"],
        "inputs": spec["inputs"],
        "kernel": "rbf-ard",
        "transform": model["transform"],
        "outputs": outputs,
        "data": data,
        "diagnostics": model.get("diagnostics", {}),
    }
    if "accuracy" in model:
        document["accuracy"] = model["accuracy"]
    if "failures" in model:
        document["failures"] = model["failures"]
    document["exported_at"] = now
    return document


@router.get(
    "/model/export",
    response_model=MetamodelExport | MultiMetamodelExport | FidelityMetamodelExport,
    response_model_exclude_unset=True,
    responses=problem_responses(404),
)
def export_model(campaign_id: CampaignId, store: StoreDep, response: Response):
    """The latest model as a self-contained JSON file (a download): its draws, mode, transforms
    and the labeled data it saw, which the SDK's ``Metamodel`` predicts from as ``/predict``
    does, without the service. 404 before the first model."""
    model = store.models.latest(campaign_id)
    spec, labels = store.campaigns.spec(campaign_id), store.labels.all(campaign_id)
    if len(labels) < model["n_labeled"]:  # deleted meanwhile: labels only ever grow
        raise NotFound(f"no campaign {campaign_id!r}")
    name = f"fbgp-al-{campaign_id}-model-{model['version']}.json"
    response.headers["Content-Disposition"] = f'attachment; filename="{name}"'
    return export_document(campaign_id, spec, model, labels, time.time())


@router.get("/history", response_model=list[HistoryEvent], responses=problem_responses(404))
def history(campaign_id: CampaignId, store: StoreDep):
    """One entry per model version stored, evaluation, refit failed, stop and resume, and per
    failed or abandoned run kept (the latest ``FBGP_KEEP_RUNS`` of each), oldest first."""
    return store.history.events(campaign_id)


def _checked_points(
    store: CampaignStore, campaign_id: str, x: list, fidelity: str | None = None
) -> list:
    """``x`` with each value as its input keeps it (422 unless it fits the inputs; 404 before
    the first model); with fidelities, each point at level ``fidelity`` (default the top)."""
    _, x = spec_with_points(store, campaign_id, x, fidelity)
    store.models.latest(campaign_id)  # 404 before the first model
    return x


@router.post(
    "/predict",
    response_model=Prediction | MultiPrediction,
    response_model_exclude_unset=True,
    responses=MODEL_RESPONSES,
)
def predict(
    campaign_id: CampaignId, body: Points, store: StoreDep, redis: RedisDep, settings: SettingsDep
):
    """The latest model's predictions at `x` (points within the inputs' bounds): the mode
    GP's mean and variance of y and the mixture's, original units; where runs have failed, the
    failure model's probability that a run at each point succeeds (`p_success`). With
    fidelities, of the top level, or of the level `fidelity` names (the mode: the draw of the
    highest posterior density)."""
    x = _checked_points(store, campaign_id, body.x, body.fidelity)
    return run_job(redis, settings, "predict", campaign_id, x)


@router.post("/acquisition", response_model=AcquisitionValues, responses=MODEL_RESPONSES)
def acquisition(
    campaign_id: CampaignId,
    body: AcquisitionRequest,
    store: StoreDep,
    redis: RedisDep,
    settings: SettingsDep,
):
    """The acquisition's scores at `x` under the latest model (the campaign's acquisition,
    or `acquisition`). With fidelities, of runs at level `fidelity` (default the top): `ivr`'s
    top-level variance removed per cost (averaged over the points `x`), or a disagreement's at
    the top level."""
    levels = store.campaigns.spec(campaign_id).get("fidelities")
    allowed = FIDELITY_ACQUISITIONS if levels else ACQUISITIONS
    if body.acquisition is not None and body.acquisition not in allowed:
        raise Unprocessable(f"acquisition: one of {list(allowed)} in this campaign")
    x = _checked_points(store, campaign_id, body.x, body.fidelity)
    return run_job(redis, settings, "acquisition", campaign_id, x, body.acquisition)


@router.get(
    "/sensitivity",
    response_model=Sensitivity | MultiSensitivity,
    responses=MODEL_RESPONSES,
)
def sensitivity(
    campaign_id: CampaignId,
    store: StoreDep,
    redis: RedisDep,
    settings: SettingsDep,
    method: Annotated[
        Literal["closed-form", "monte-carlo"],
        Query(
            description=(
                "`closed-form` (exact for the model's squared-exponential kernel) or "
                "`monte-carlo` (Saltelli's and Jansen's estimators on 8,192 samples)"
            )
        ),
    ] = "closed-form",
    level: Annotated[
        float, Query(gt=0, lt=1, description=("The credible intervals' probability."))
    ] = 0.95,
):
    """Which inputs matter: the first-order and total Sobol indices of the latest model's mean,
    each input uniform over its range (a log input on the log scale, an int input over its
    integers, a choice over its values, as one input), each index's mean and credible interval
    over the posterior's draws: the uncertainty of the lengthscales and noise, not of the mean
    at fixed ones. With several outputs, each output's; with fidelities, the top level's (by
    Monte Carlo, whatever `method` says). Its work grows as the labels squared (about 3 s at
    200 labels in 6-D, about 2 minutes at 2,000); a model's indices are kept, so that asking
    again, or the page's Sobol picture, costs nothing until the next model. Past the API's
    wait the answer is 503 with `Retry-After` while the job goes on; asking again waits for
    it."""
    store.models.latest(campaign_id)  # 404 before the first model
    return run_job(redis, settings, "sensitivity", campaign_id, method, level)


@router.post(
    "/evaluate",
    response_model=Evaluation | MultiEvaluation,
    responses=MODEL_RESPONSES,
)
def evaluate(
    campaign_id: CampaignId,
    body: Observations,
    store: StoreDep,
    redis: RedisDep,
    settings: SettingsDep,
):
    """The test set's metrics; ``noise``: the test points' known noise variances (campaigns with
    known noise), added to their predictive variances."""
    limits.check_evaluate(len(body.x), settings)
    if body.fidelity is not None:
        raise Unprocessable("fidelity: /evaluate measures the top level; send no fidelity")
    spec = store.campaigns.spec(campaign_id)
    if body.noise is not None and not known_noise(spec):
        raise Unprocessable(f"noise: {LEARNED_NOISE}")
    x = _checked_points(store, campaign_id, body.x)
    with unprocessable_values():
        y, noise = checked_rows(spec, body.y, body.noise)
    names = output_names(spec)
    if names is not None:  # each output's column
        y = {name: [row[name] for row in y] for name in names}
        noise = None if noise is None else {name: [row[name] for row in noise] for name in names}
    if noise is None:  # the job's arguments as they were before known noise
        return run_job(redis, settings, "evaluate", campaign_id, x, y)
    return run_job(redis, settings, "evaluate", campaign_id, x, y, noise)
