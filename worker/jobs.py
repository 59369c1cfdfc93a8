"""RQ jobs: the glue between the campaign store and the math (:mod:`worker.refit`).

Jobs are top-level functions taking a campaign id and plain values; they load their own data,
can run again safely, and write a model only when it is complete. The service enqueues them by
dotted name and never imports this module.
"""

from __future__ import annotations

import logging
import os
import time

import torch
from redis import Redis
from rq import Worker, get_current_job

from service.observability import json_logging, record_refit
from service.queues import QUEUES
from service.settings import get_settings
from service.store import CampaignStore, NotFound, pool_of
from worker import refit as math_
from worker import views

log = logging.getLogger("fbgp.worker")


def _ids(campaign_id: str, **more) -> dict:
    job = get_current_job()
    return {"campaign": campaign_id, "job": job.id if job else None, **more}


def _store() -> CampaignStore:
    return CampaignStore(get_current_job().connection)


def refit(campaign_id: str) -> dict:
    """Refit a campaign on all its labels; enqueue one more if labels arrived meanwhile."""
    store = _store()
    try:
        spec = store.spec(campaign_id)
    except NotFound:
        return {"campaign": campaign_id, "skipped": "deleted"}
    store.refit_started(campaign_id, time.time())
    labels = store.labels(campaign_id)
    n = len(labels)
    result = {"campaign": campaign_id, "n_labeled": n}
    try:
        exclude = set() if spec["allow_repeats"] else store.labeled_indices(campaign_id)
        pending = sorted(store.pending_indices(campaign_id, time.time()))
        try:
            previous = store.model(campaign_id)
        except NotFound:
            previous = None
        model, ranking = math_.fit(spec, pool_of(spec), labels, exclude, pending, previous)
        store.save_model(campaign_id, model, ranking)
        d = model["diagnostics"]
        result.update(version=n, seconds=d["refit_seconds"], max_rhat=d["max_rhat"])
        record_refit(store.r, d["refit_seconds"])
        log.info("model %d in %.2f s (R-hat %.3f, %d divergences)", n, d["refit_seconds"],
                 d["max_rhat"], d["divergences"], extra=_ids(campaign_id, version=n))  # fmt: skip
    except Exception as error:  # the campaign keeps its previous model and goes on
        store.refit_failed(campaign_id, f"{type(error).__name__}: {error}", n)
        log.error("refit failed: %s", error, exc_info=True, extra=_ids(campaign_id))
        result["error"] = repr(error)
    if store.refit_finished(campaign_id, n, time.time()):
        store.enqueue_refit(campaign_id)
    return result


def _with_model(campaign_id: str):
    store = _store()
    spec = store.spec(campaign_id)
    return spec, store.model(campaign_id), store.labels(campaign_id)


def predict(campaign_id: str, x: list) -> dict:
    spec, model, labels = _with_model(campaign_id)
    return dict(math_.predict(spec, model, labels, x), model_version=model["version"])


def acquisition(campaign_id: str, x: list, name: str | None) -> dict:
    spec, model, labels = _with_model(campaign_id)
    result = math_.acquisition(spec, model, labels, x, name or spec["acquisition"])
    return dict(result, model_version=model["version"])


def evaluate(campaign_id: str, x: list, y: list) -> dict:
    spec, model, labels = _with_model(campaign_id)
    result = math_.evaluate(spec, model, labels, x, y)
    _store().record_evaluation(campaign_id, model["version"], result)
    return dict(result, model_version=model["version"])


def plot(campaign_id: str, kind: str) -> bytes | None:
    """A PNG for the campaign page: ``posterior``, ``model`` or ``curve`` (None: none to draw)."""
    store = _store()
    if kind == "curve":
        return views.curve_png(store.history(campaign_id))
    spec, model, labels = _with_model(campaign_id)
    if kind == "posterior":
        return views.posterior_png(spec, model)
    return views.model_png(spec, model, labels)


def run_worker(name: str | None = None, burst: bool = False) -> None:
    """Serve the queues (high priority first) with one torch thread, the sampler compiled before
    the first job. Work horses are forked from this process, so they start warm."""
    torch.set_num_threads(1)
    from worker.mcmc import sample_posterior

    sample_posterior([[0.5]], [0.0], chains=1, warmup=2, samples=2)  # compile the sampler now
    json_logging()
    log.info(
        "worker pid %d on cores %s, %d torch thread, queues %s",
        os.getpid(), sorted(os.sched_getaffinity(0)), torch.get_num_threads(), ", ".join(QUEUES),
    )  # fmt: skip
    connection = Redis.from_url(get_settings().redis_url)
    worker = Worker(list(QUEUES), connection=connection, name=name, log_job_description=False)
    worker.work(burst=burst)
