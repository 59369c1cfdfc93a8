"""RQ jobs: the glue between the campaign store and the math (:mod:`worker.refit`).

Jobs are top-level functions taking a campaign id and plain values; they load their own data,
can run again safely, and write a model only when it is complete. The service enqueues them by
dotted name and never imports this module.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time

import numpy as np
import torch
from redis import Redis
from redis.exceptions import RedisError
from rq import Queue, Worker, get_current_job
from rq.job import Dependency, Job

from service.observability import json_logging, record_refit
from service.queues import QUEUES, REFIT
from service.settings import get_settings
from service.store import CampaignStore, NotFound, pool_of
from worker import answers, views
from worker import refit as math_
from worker.mcmc import assemble, judge_warm_start, sample_posterior
from worker.nuts import Draws

log = logging.getLogger("fbgp.worker")


def _ids(campaign_id: str, **more) -> dict:
    job = get_current_job()
    return {"campaign": campaign_id, "job": job.id if job else None, **more}


def _store() -> CampaignStore:
    return CampaignStore(get_current_job().connection)


def refit(campaign_id: str) -> dict:
    """Refit a campaign on all its labels. When other workers are idle, the chains are split
    into one group per free worker, each a job, and :func:`refit_merge` (which depends on them)
    finishes the refit; when they are busy (other campaigns' refits), all of it runs here, which
    costs least in all. Either way one more refit is enqueued at the end if labels arrived
    meanwhile.

    The job's id is its token: it writes nothing once another refit is in charge (one revived
    after this one was taken for dead)."""
    store = _store()
    token = get_current_job().id
    began = time.time()
    if not store.beat(campaign_id, token, began, start=True):
        return {"campaign": campaign_id, "skipped": "not in charge (deleted or superseded)"}
    spec = store.spec(campaign_id)
    n = store.n_labeled(campaign_id)
    groups = chain_groups(spec["mcmc"]["chains"], _free_workers(store.r))
    if len(groups) > 1:
        return _dispatch(store, campaign_id, spec, n, groups, token, began)
    started = time.perf_counter()

    def posterior(data):
        post = math_.posterior(spec, data, _warm(store, campaign_id, spec))
        post.diagnostics["chain_groups"] = 1
        return post

    return _complete(store, campaign_id, spec, n, token, began, started, posterior)


def _complete(store, campaign_id, spec, n, token, began, started, posterior) -> dict:
    """The end every refit shares, under its lease: ``posterior(data)`` on the first ``n``
    labels, then the model stored (or the failure recorded: the campaign keeps its previous
    model and goes on), then one more refit enqueued if labels arrived meanwhile."""
    with lease(store, campaign_id, token):
        try:
            data = math_.prepare(spec, store.labels(campaign_id)[:n])
            post = posterior(data)
            result = _finish(store, campaign_id, spec, data, post, started, token, began)
        except RedisError:
            raise  # the store is out of reach: nothing can be recorded; the refit is revived
        except Exception as error:
            result = _failed(store, campaign_id, n, error, token)
    _next_refit(store, campaign_id, n, token)
    return result


@contextlib.contextmanager
def lease(store: CampaignStore, campaign_id: str, token: str):
    """Keep refit ``token``'s heartbeat fresh while the block runs. Should this job's worker die,
    the job (a forked work horse) exits too: its refit is revived elsewhere."""
    every = get_settings().heartbeat_seconds
    parent = os.getppid()
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every):
            if os.getppid() != parent:
                log.error("the worker died; this refit is abandoned", extra=_ids(campaign_id))
                os._exit(70)
            with contextlib.suppress(RedisError):
                store.beat(campaign_id, token, time.time())

    thread = threading.Thread(target=beat, name="refit-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _free_workers(connection) -> int:
    """This worker and the idle ones."""
    others = [w for w in Worker.all(connection=connection) if w.name != _current_worker()]
    return 1 + sum(1 for w in others if w.get_state() == "idle")


def _current_worker() -> str | None:
    job = get_current_job()
    return job.worker_name if job else None


def chain_groups(chains: int, workers: int) -> list[list[int]]:
    """Chains ``0..chains-1`` split into one contiguous group per worker (at most one per
    chain). A chain's draws depend on its seed and number, and on its group only through the
    rounding of batched linear algebra."""
    k = max(1, min(chains, workers))
    return [g.tolist() for g in np.array_split(np.arange(chains), k)]


def _dispatch(store, campaign_id: str, spec: dict, n: int, groups: list[list[int]], token: str,
              began: float) -> dict:  # fmt: skip
    warm = _warm(store, campaign_id, spec)
    queue = Queue(REFIT, connection=store.r)
    jobs = [queue.enqueue_call("worker.jobs.refit_chains", args=(campaign_id, n, ids, warm, token),
                               timeout=3600, result_ttl=3600, failure_ttl=86400, at_front=True)
            for ids in groups]  # fmt: skip
    # the merge runs even if a group failed: it then runs the missing chains itself
    after = Dependency(jobs=jobs, allow_failure=True)
    merge = queue.enqueue_call(
        "worker.jobs.refit_merge", args=(campaign_id, n, [j.id for j in jobs], token, began),
        depends_on=after, timeout=3600, result_ttl=600, failure_ttl=86400,
    )  # fmt: skip
    return {"campaign": campaign_id, "n_labeled": n, "groups": groups, "merge": merge.id}


def refit_chains(campaign_id: str, n: int, chain_ids: list[int], warm: dict | None,
                 token: str) -> dict | None:  # fmt: skip
    """One group of refit ``token``'s chains (on whichever worker takes it)."""
    store = _store()
    if not store.beat(campaign_id, token, time.time()):
        return None  # another refit is in charge
    with lease(store, campaign_id, token):
        spec = store.spec(campaign_id)
        data = math_.prepare(spec, store.labels(campaign_id)[:n])
        draws, how = math_.chains(spec, data, chain_ids, warm)
    return {"draws": draws.to_dict(), "how": how, "warm": warm is not None}


def refit_merge(campaign_id: str, n: int, job_ids: list[str], token: str, began: float) -> dict:
    """The chains' draws together: diagnostics, the mode, a warm start judged (and redone cold
    here if it did not mix), then scoring, ranking and the new model."""
    store = _store()
    started = time.perf_counter() - max(0.0, time.time() - began)  # since the refit began
    if not store.beat(campaign_id, token, time.time()):
        return {"campaign": campaign_id, "skipped": "not in charge (deleted or superseded)"}
    spec = store.spec(campaign_id)

    def posterior(data):
        results = [Job.fetch(j, connection=store.r).return_value() for j in job_ids]
        if any(r is None for r in results):  # a group failed or its worker died: redo all here
            log.warning("a chain group is missing; running all chains here",
                        extra=_ids(campaign_id))  # fmt: skip
            draws, how = math_.chains(spec, data)
            warm = None
        else:
            draws = Draws.concatenate([Draws.from_dict(r["draws"]) for r in results])
            how = "warm" if all(r["how"] == "warm" for r in results) else "cold"
            warm = {} if results[0]["warm"] else None
        how, redo = judge_warm_start(draws, how, warm)
        if redo:
            draws, _ = math_.chains(spec, data)
        seconds = time.perf_counter() - started  # the chain groups' time included
        post = assemble(draws, data.u.shape[1], seconds, how, data.seed)
        post.diagnostics["chain_groups"] = len(job_ids)
        return post

    return _complete(store, campaign_id, spec, n, token, began, started, posterior)


def _warm(store, campaign_id: str, spec: dict) -> dict | None:
    try:
        return math_.warm_start_of(spec, store.model(campaign_id))
    except NotFound:
        return None


def _finish(store, campaign_id, spec, data, post, started, token, began) -> dict:
    snap = store.snapshot(campaign_id, time.time())
    exclude = set() if spec["allow_repeats"] else snap.labeled
    pending = sorted(snap.pending)
    model, ranking = math_.model_and_ranking(spec, pool_of(spec), data, post, exclude, pending,
                                             started)  # fmt: skip
    model["diagnostics"]["started_at"] = began
    if not store.save_model(campaign_id, model, ranking, token):
        log.warning("model %d not stored: another refit is in charge or newer", data.n,
                    extra=_ids(campaign_id, version=data.n))  # fmt: skip
        return {"campaign": campaign_id, "n_labeled": data.n, "skipped": "not stored"}
    d = model["diagnostics"]
    record_refit(store.r, d["refit_seconds"])
    log.info("model %d in %.2f s (R-hat %.3f, %d divergences, %s)", data.n, d["refit_seconds"],
             d["max_rhat"], d["divergences"], d["warm_start"],
             extra=_ids(campaign_id, version=data.n))  # fmt: skip
    return {"campaign": campaign_id, "n_labeled": data.n, "version": data.n,
            "seconds": d["refit_seconds"], "max_rhat": d["max_rhat"]}  # fmt: skip


def _failed(store, campaign_id: str, n: int, error: Exception, token: str) -> dict:
    """The campaign keeps its previous model and goes on."""
    store.refit_failed(campaign_id, f"{type(error).__name__}: {error}", n, token)
    log.error("refit failed: %s", error, exc_info=True, extra=_ids(campaign_id))
    return {"campaign": campaign_id, "n_labeled": n, "error": repr(error)}


def _next_refit(store, campaign_id: str, n: int, token: str) -> None:
    if store.refit_finished(campaign_id, n, time.time(), token):
        store.enqueue_refit(campaign_id)


def _with_model(campaign_id: str):
    store = _store()
    spec = store.spec(campaign_id)
    return spec, store.model(campaign_id), store.labels(campaign_id)


def predict(campaign_id: str, x: list) -> dict:
    spec, model, labels = _with_model(campaign_id)
    return dict(answers.predict(spec, model, labels, x), model_version=model["version"])


def acquisition(campaign_id: str, x: list, name: str | None) -> dict:
    spec, model, labels = _with_model(campaign_id)
    result = answers.acquisition(spec, model, labels, x, name or spec["acquisition"])
    return dict(result, model_version=model["version"])


def evaluate(campaign_id: str, x: list, y: list) -> dict:
    spec, model, labels = _with_model(campaign_id)
    result = answers.metrics(spec, model, labels, x, y)
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


class FbgpWorker(Worker):
    """An RQ worker whose maintenance also revives the refits of campaigns left stuck by a dead
    worker, so that a campaign recovers even when no simulator is polling it."""

    # SIGTERM or SIGINT came (RQ says so only when a job runs); on the class, since the handler
    # of a worker that lost Redis may be the one that hears it
    shutdown_requested = False

    def handle_warm_shutdown_request(self):
        FbgpWorker.shutdown_requested = True
        super().handle_warm_shutdown_request()

    def run_maintenance_tasks(self):
        super().run_maintenance_tasks()
        settings = get_settings()
        try:
            revived = CampaignStore(self.connection).revive_all(
                time.time(), settings.refit_lease_seconds
            )
        except RedisError as error:
            log.warning("could not look for stuck refits: %s", error)
            return
        for campaign_id in revived:
            log.warning("refit revived: its job had died", extra={"campaign": campaign_id})


def run_worker(name: str | None = None, burst: bool = False) -> None:
    """Serve the queues (high priority first) with one torch thread, the sampler compiled before
    the first job. Work horses are forked from this process, so they start warm. When Redis goes
    away the worker keeps trying to reach it, and serves again once it is back."""
    torch.set_num_threads(1)

    sample_posterior([[0.5]], [0.0], chains=1, warmup=2, samples=2)  # compile the sampler now
    json_logging()
    log.info(
        "worker pid %d on cores %s, %d torch thread, queues %s",
        os.getpid(), sorted(os.sched_getaffinity(0)), torch.get_num_threads(), ", ".join(QUEUES),
    )  # fmt: skip
    settings = get_settings()
    attempt = 0
    while True:
        try:
            connection = Redis.from_url(settings.redis_url)
            worker = FbgpWorker(
                list(QUEUES), connection=connection, log_job_description=False,
                name=name if attempt == 0 else None,  # a dead registration may hold the name
                worker_ttl=settings.worker_ttl, maintenance_interval=settings.maintenance_interval,
                job_monitoring_interval=settings.job_monitoring_interval,
            )  # fmt: skip
            worker.work(burst=burst)
        except RedisError as error:
            log.error("Redis unreachable: %s", error)
        if burst or FbgpWorker.shutdown_requested:
            return
        attempt += 1
        log.warning("the worker lost Redis; starting again in 2 s")
        time.sleep(2.0)
        if FbgpWorker.shutdown_requested:  # asked to stop while we waited
            return
