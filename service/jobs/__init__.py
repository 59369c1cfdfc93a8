"""RQ jobs: the glue between the campaign store (:mod:`service.store`) and the math
(:mod:`worker.fitting`, :mod:`worker.answers`, :mod:`worker.views`), the one layer that imports
both.

Jobs are top-level functions taking a campaign id and plain values; they load their own data,
can run again safely, and write a model only when it is complete. Their arguments and results
are plain JSON (ids, numbers, lists, dicts), as RQ keeps them (:data:`service.queues.SERIALIZER`).
The API enqueues them by dotted name (``fbgp_al.service.jobs.refit``, ``.refit_chains``,
``.refit_merge``, ``.score_part``, ``.predict``, ``.acquisition``, ``.evaluate``, ``.plot``,
``.sensitivity``: :data:`service.queues.JOBS`, the only functions a worker runs) and never
imports this package, which loads torch. The chains' fan-out is :mod:`service.jobs.fanout`, a
refit's heartbeat :mod:`service.jobs.lease`, the worker :mod:`service.jobs.process`.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import time

from redis.exceptions import RedisError
from rq import get_current_job

from fbgp_al.service import costs, job_results
from fbgp_al.service.jobs import fanout
from fbgp_al.service.jobs.lease import lease, log_ids
from fbgp_al.service.refusals import NotFound
from fbgp_al.service.settings import get_settings
from fbgp_al.service.store import CampaignStore
from fbgp_al.worker import answers, effect_views, fitting, views
from fbgp_al.worker.mcmc import Target, assemble
from fbgp_al.worker.sensitivity import sensitivity_outputs
from fbgp_al.worker.vocabulary.defaults import (
    output_labels,
    output_names,
    output_spec,
    output_title,
)
from fbgp_al.worker.vocabulary.sampler import sampler_line
from fbgp_al.worker.warm_start import judge_warm_start

log = logging.getLogger("fbgp.worker")


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
    inputs = store.refits.inputs(campaign_id, token, began, start=True)
    if inputs is None:
        return {"campaign": campaign_id, "skipped": "not in charge (deleted or superseded)"}
    spec = inputs.spec
    # one output sampled by NUTS: its chains may go to idle workers (not several outputs, and
    # not a large campaign's Laplace mixture, which has no chains to share)
    if not output_names(spec) and not fitting.uses_laplace(spec, inputs.n):
        chains = spec["mcmc"]["chains"]
        where = fanout.chain_lane(
            fanout.lane(), inputs.previous, inputs.n, chains, get_settings().long_refit_seconds
        )
        free = fanout.free_workers(store, campaign_id, began, where)
        groups = fanout.chain_groups(chains, free)
        if len(groups) > 1:
            return _fan_out(store, campaign_id, inputs, groups, token, began, where)
    started = time.perf_counter()

    def sample() -> fitting.Sampled:
        sampled = fitting.sample(
            spec, inputs.labels, inputs.previous, get_settings().limit_mode_draws
        )
        if sampled.post is not None:
            sampled.post.diagnostics["chain_groups"] = 1
        return sampled

    return _complete(store, campaign_id, inputs, token, began, started, sample)


def _fan_out(store, campaign_id, inputs, groups, token, began, where: str | None = None) -> dict:
    """A refit's chains as one job per group (on queue ``where``) and the merge after them
    (:func:`service.jobs.fanout.dispatch`), tracked so that a delete or a failure stops them."""
    spec, n = inputs.spec, inputs.n
    warm = fitting.warm_start_of(spec, inputs.previous)
    timeout = costs.refit_timeout(spec, n, get_settings())

    def track(job_ids: list[str]) -> bool:
        now = time.time()
        members = [f"refit:{j}" for j in job_ids]
        # the last is the merge: while it waits its turn, nothing beats for the refit
        return store.jobs.track(
            campaign_id, members, now, now + 2 * timeout
        ) and store.refits.note_merge(campaign_id, token, job_ids[-1])

    merge = fanout.dispatch(
        store.r, campaign_id, n, groups, warm, token, began, timeout, track, where
    )
    return {"campaign": campaign_id, "n_labeled": n, "groups": groups, "merge": merge}


def _complete(store, campaign_id, inputs, token, began, started, sample) -> dict:
    """The end every refit shares, under its lease: ``sample()`` (a
    :class:`worker.fitting.Sampled`: the posterior on the refit's labels, ``inputs``:
    :class:`service.store.refits.RefitInputs`), then the candidates and the failed runs read as
    they are now and ranked, the failure model fitted on them (:func:`worker.fitting.rank`),
    the model stored and one more refit enqueued if labels arrived meanwhile; or the failure
    recorded (an error, out of memory or time): the campaign keeps its previous model, and the
    refit runs again, after a back-off, until it fails too often in a row."""
    spec, n = inputs.spec, inputs.n

    def fit():
        sampled = sample()
        share = _share(store, campaign_id, spec, n, len(sampled.fits or [None]))
        return lambda pool, exclude, pending, failures: fanout.driven(
            fitting.ranked(spec, sampled, pool, exclude, pending, failures, started), share
        )

    return _under_lease(store, campaign_id, spec, n, token, began, fit)


def refit_chains(
    campaign_id: str, n: int, chain_ids: list[int], warm: dict | None, token: str
) -> dict | None:
    """One group of refit ``token``'s chains (on whichever worker takes it)."""
    store = _store()
    inputs = store.refits.inputs(campaign_id, token, time.time())
    if inputs is None:
        return None  # another refit is in charge
    with lease(store, campaign_id, token):
        spec = inputs.spec
        data = fitting.prepare(spec, inputs.labels[:n])
        peers = fanout.Peers(store.groups, token, chain_ids, spec["mcmc"]["chains"])
        try:
            draws, how = fitting.chains(spec, data, chain_ids, warm, peers=peers)
        except BaseException:  # RQ's timeout and a stop included: the others must not wait
            with contextlib.suppress(RedisError):
                peers.abandon()
            raise
    return fanout.group_result(draws, how, warm)


def refit_merge(campaign_id: str, n: int, job_ids: list[str], token: str, began: float) -> dict:
    """The chains' draws together: diagnostics, the mode, a warm start judged (and redone cold
    here if it did not mix), then scoring, ranking and the new model."""
    store = _store()
    started = time.perf_counter() - max(0.0, time.time() - began)  # since the refit began
    inputs = store.refits.inputs(campaign_id, token, time.time())
    if inputs is None:
        job_results.forget(store.r, job_ids)  # the groups' draws: nobody reads them now
        return {"campaign": campaign_id, "skipped": "not in charge (deleted or superseded)"}
    spec = inputs.spec
    inputs.labels, inputs.n = inputs.labels[:n], n  # the labels the chain groups sampled on

    def sample() -> fitting.Sampled:
        data = fitting.prepare(spec, inputs.labels)
        groups = fanout.merged(store.r, job_ids)
        store.groups.forget(token)
        if groups is None:  # a group failed or its worker died: redo all here
            log.warning(
                "a chain group is missing; running all chains here", extra=log_ids(campaign_id)
            )
            draws, how = fitting.chains(spec, data)
            warm = None
        else:
            draws, how, warm = groups
        how, redo = judge_warm_start(draws, how, warm, Target.of(spec["mcmc"]))
        if redo:
            draws, _ = fitting.chains(spec, data)
        seconds = time.perf_counter() - started  # the chain groups' time included
        post = assemble(
            draws,
            data.u.shape[1],
            seconds,
            how,
            data.seed,
            get_settings().limit_mode_draws,
            mode_rule=spec["mcmc"].get("mode_rule", "kde"),
            prior_mean=data.prior_mean,
            noise_floor=fitting.noise_floor(spec),
        )
        post.diagnostics["chain_groups"] = len(job_ids)
        return fitting.Sampled(inputs.labels, data, post)

    return _complete(store, campaign_id, inputs, token, began, started, sample)


def _under_lease(store, campaign_id, spec, n, token, began, fit) -> dict:
    """Under the refit's lease, ``fit()`` (the posterior: a function that ranks candidates), and
    the ranking of the candidates as they are now, once the posterior is sampled (points labeled
    or out meanwhile left out or pending); then, out of the lease, the model and ranking stored
    and the refit ended, the next enqueued if labels came meanwhile
    (:meth:`service.store.refits.Refits.finish`); or the failure recorded (the failure
    hands the refit on)."""
    try:
        with lease(store, campaign_id, token):
            rank = fit()
            model, ranking = rank(*store.models.candidates(campaign_id, spec, time.time()))
    except RedisError:
        raise  # the store is out of reach: nothing can be recorded; the refit is revived
    except Exception as error:  # MemoryError and RQ's JobTimeoutException included
        return _failed(store, campaign_id, n, error, token)
    model["diagnostics"]["started_at"] = began
    if not store.refits.finish(campaign_id, model, ranking, token, n, time.time()):
        log.warning(
            "model %d not stored: another refit is in charge or newer",
            n,
            extra=log_ids(campaign_id, version=n),
        )
        return {"campaign": campaign_id, "n_labeled": n, "skipped": "not stored"}
    d = model["diagnostics"]
    log.info(
        "model %d in %.2f s (%s, %s)",
        n,
        d["refit_seconds"],
        sampler_line(d),
        d["warm_start"],
        extra=log_ids(campaign_id, version=n),
    )
    return {
        "campaign": campaign_id,
        "n_labeled": n,
        "version": n,
        "seconds": d["refit_seconds"],
        "max_rhat": d["max_rhat"],
    }


def _share(store, campaign_id: str, spec: dict, n: int, outputs: int = 1):
    """How a refit on ``n`` labels scores its candidates: in parts over the idle workers of its
    queue (:func:`service.jobs.fanout.share_scoring`), when the parts are worth it."""
    work, timeout = costs.scoring(spec, n, get_settings(), outputs)
    return fanout.share_scoring(store, campaign_id, work, timeout)


def score_part(key: str, start: int) -> dict:
    """A part of a refit's scoring that an idle worker took
    (:func:`service.jobs.fanout.share_scoring`): the scores of the candidates from ``start`` on
    that are kept under ``key``, packed (:func:`worker.scoring.pack`)."""
    return fanout.score_part(_store().groups, key, start)


def _failed(store, campaign_id: str, n: int, error: Exception, token: str) -> dict:
    """The campaign keeps its previous model and goes on."""
    message = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    with contextlib.suppress(NotFound):  # deleted meanwhile
        store.refits.fail(campaign_id, message, n, token, get_current_job().id)
    log.error("refit failed: %s", error, exc_info=error, extra=log_ids(campaign_id))
    return {"campaign": campaign_id, "n_labeled": n, "error": repr(error)}


def _with_model(campaign_id: str):
    store = _store()
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
    result = sensitivity_outputs(spec, model, labels, method=method, level=level)
    return dict(result, model_version=model["version"])


def evaluate(campaign_id: str, x: list, y: list, noise: list | None = None) -> dict:
    spec, model, labels = _with_model(campaign_id)
    answer = answers.metrics_outputs if output_names(spec) else answers.metrics
    result = answer(spec, model, labels, x, y, noise)
    _store().models.record_evaluation(campaign_id, model["version"], result)
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
    store = _store()
    if kind == "curve":
        return views.curve_png(store.history.read(campaign_id))
    if kind == "accuracy":
        return views.accuracy_png(
            store.history.read(campaign_id), store.campaigns.spec(campaign_id)
        )
    spec, model, labels = _with_model(campaign_id)
    if kind == "failures":  # one failure model, over the inputs, whatever the outputs
        return views.failures_png(spec, model, labels, store.runs.failures(campaign_id))
    names = output_names(spec)
    title = output_title(spec, output)
    if names:
        k = names.index(output) if output in names else 0
        spec, model, labels = (
            output_spec(spec, k),
            answers.output_model(model, names[k]),
            output_labels(labels, names[k]),
        )
    if kind == "posterior":
        return views.posterior_png(spec, model, title)
    if kind == "effects":
        return effect_views.effects_png(spec, model, labels, title)
    if kind == "sobol":
        return effect_views.sobol_png(spec, model, labels, title)
    if kind == "pair":
        index = {i["name"]: j for j, i in enumerate(spec["inputs"])}
        if not inputs or len(inputs) != 2 or not set(inputs) <= set(index):
            return None
        return effect_views.pair_png(
            spec, model, labels, title, (index[inputs[0]], index[inputs[1]])
        )
    return views.model_png(spec, model, labels, title)
