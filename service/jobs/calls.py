"""A model's calls, each on the campaign's latest model: its predictions, acquisition values,
Sobol indices, evaluations on a test set and the pages' pictures (jobs of
:data:`service.queues.JOBS`, re-exported by :mod:`service.jobs`)."""

from __future__ import annotations

import base64
import json

from rq import get_current_job

from fbgp_al.service.store import CampaignStore
from fbgp_al.worker import answers, effect_views, views
from fbgp_al.worker.fidelity import views as fidelity_views
from fbgp_al.worker.sensitivity import sensitivity_outputs
from fbgp_al.worker.vocabulary.defaults import (
    output_labels,
    output_names,
    output_spec,
    output_title,
)


def job_store() -> CampaignStore:
    """The store of the Redis the current job came from."""
    return CampaignStore(get_current_job().connection)


def _with_model(campaign_id: str):
    store = job_store()
    spec = store.campaigns.spec(campaign_id)
    return spec, store.models.latest(campaign_id), store.labels.all(campaign_id)


def predict(campaign_id: str, x: list) -> dict:
    spec, model, labels = _with_model(campaign_id)
    if output_names(spec):
        result = answers.predict_outputs(spec, model, labels, x)
    else:
        result = answers.predict(spec, model, labels, x)
    return dict(result, model_version=model["version"])


def acquisition(campaign_id: str, x: list, name: str | None) -> dict:
    spec, model, labels = _with_model(campaign_id)
    answer = answers.acquisition_outputs if output_names(spec) else answers.acquisition
    result = answer(spec, model, labels, x, name or spec["acquisition"])
    return dict(result, model_version=model["version"])


def sensitivity(campaign_id: str, method: str, level: float) -> dict:
    """The latest model's Sobol indices (:func:`worker.sensitivity.sensitivity_outputs`)."""
    spec, model, labels = _with_model(campaign_id)
    result = _indices(campaign_id, spec, model, labels, method, level)
    return dict(result, model_version=model["version"])


def _indices(
    campaign_id: str,
    spec: dict,
    model: dict,
    labels: list[dict],
    method: str = "closed-form",
    level: float = 0.95,
) -> dict:
    """:func:`worker.sensitivity.sensitivity_outputs` of ``model``, kept with the campaign's
    pictures for the model's version: the Sobol picture and ``GET .../sensitivity`` ask for
    the same indices, which take minutes at a few thousand labels."""
    store = job_store()
    name, version = f"sensitivity:{method}:{level!r}", str(model["version"])
    kept = store.plots.cached(campaign_id, name, version)
    if kept is not None:
        return json.loads(kept)
    result = sensitivity_outputs(spec, model, labels, method=method, level=level)
    store.plots.keep(campaign_id, name, version, json.dumps(result).encode())
    return result


def evaluate(campaign_id: str, x: list, y: list, noise: list | None = None) -> dict:
    spec, model, labels = _with_model(campaign_id)
    answer = answers.metrics_outputs if output_names(spec) else answers.metrics
    result = answer(spec, model, labels, x, y, noise)
    job_store().models.record_evaluation(campaign_id, model["version"], result)
    return dict(result, model_version=model["version"])


def plot(
    campaign_id: str, kind: str, output: str | None = None, inputs: list[str] | None = None
) -> str | None:
    """A PNG for the campaign page, base64 (a job's result is JSON): ``posterior``, ``model``,
    ``effects``, ``sobol``, ``pair``, ``failures``, ``curve`` or ``accuracy`` (None: none to
    draw); with several outputs the ``posterior``, ``model``, ``effects``, ``sobol`` and
    ``pair`` of ``output`` (default the first), and their one ``failures``; ``inputs``: the
    two inputs a ``pair`` is drawn over (by name)."""
    png = _png(campaign_id, kind, output, inputs)
    return None if png is None else base64.b64encode(png).decode()


def _png(campaign_id: str, kind: str, output: str | None, inputs: list[str] | None):
    store = job_store()
    if kind == "curve":
        return views.curve_png(store.history.read(campaign_id))
    if kind == "accuracy":
        return views.accuracy_png(
            store.history.read(campaign_id), store.campaigns.spec(campaign_id)
        )
    spec, model, labels = _with_model(campaign_id)
    if "fidelity" in model:  # the levels' model over one input; no other picture yet
        return fidelity_views.model_png(spec, model, labels) if kind == "model" else None
    if kind == "failures":  # one failure model, over the inputs, whatever the outputs
        return views.failures_png(spec, model, labels, store.runs.failures(campaign_id))
    names = output_names(spec)
    title = output_title(spec, output)
    indices = _indices(campaign_id, spec, model, labels) if kind == "sobol" else None
    if names:
        k = names.index(output) if output in names else 0
        spec, model, labels = (
            output_spec(spec, k),
            answers.output_model(model, names[k]),
            output_labels(labels, names[k]),
        )
        indices = indices and indices["outputs"][names[k]]
    if kind == "posterior":
        return views.posterior_png(spec, model, title)
    if kind == "effects":
        return effect_views.effects_png(spec, model, labels, title)
    if kind == "sobol":
        return effect_views.sobol_png(spec, model, labels, title, indices)
    if kind == "pair":
        index = {i["name"]: j for j, i in enumerate(spec["inputs"])}
        if not inputs or len(inputs) != 2 or not set(inputs) <= set(index):
            return None
        return effect_views.pair_png(
            spec, model, labels, title, (index[inputs[0]], index[inputs[1]])
        )
    return views.model_png(spec, model, labels, title)
