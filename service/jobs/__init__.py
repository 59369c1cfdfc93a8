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
refit's heartbeat :mod:`service.jobs.lease`, the worker :mod:`service.jobs.process`, a model's
calls (predictions, indices, pictures) :mod:`service.jobs.calls`.

Every entry of a job into the store is made here, at most three into the campaign's nouns per
job (what it reads, the candidates once sampled, what it writes; the workers it may take read
with the first two, with the candidates only when its scoring may be worth parts): the math's
steps (a chain group's checks, a ranking's scorings) are driven from here (:func:`judged`,
:func:`driven`), and so is what the parts of a fanned-out refit exchange through the store while
they run (:func:`_wait`, :func:`share_scoring`, :func:`score_part`); :mod:`service.jobs.fanout`
is given values and says what to write.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time

from redis.exceptions import RedisError
from rq import get_current_job

from fbgp_al.service import costs, job_results
from fbgp_al.service.jobs import fanout
from fbgp_al.service.jobs.calls import acquisition as acquisition
from fbgp_al.service.jobs.calls import evaluate as evaluate
from fbgp_al.service.jobs.calls import job_store
from fbgp_al.service.jobs.calls import plot as plot
from fbgp_al.service.jobs.calls import predict as predict
from fbgp_al.service.jobs.calls import sensitivity as sensitivity
from fbgp_al.service.jobs.lease import lease, log_ids
from fbgp_al.service.queues import ordinary
from fbgp_al.service.refusals import NotFound
from fbgp_al.service.settings import get_settings
from fbgp_al.service.store.models import Candidates
from fbgp_al.worker import fitting
from fbgp_al.worker.mcmc import Target, assemble
from fbgp_al.worker.vocabulary.defaults import POOL_SUBSAMPLE, output_names
from fbgp_al.worker.vocabulary.sampler import sampler_line
from fbgp_al.worker.warm_start import judge_warm_start

log = logging.getLogger("fbgp.worker")


def refit(campaign_id: str) -> dict:
    """Refit a campaign on all its labels. When other workers are idle, the chains are split
    into one group per free worker, each a job, and :func:`refit_merge` (which depends on them)
    finishes the refit; when they are busy (other campaigns' refits), all of it runs here, which
    costs least in all. Either way one more refit is enqueued at the end if labels arrived
    meanwhile.

    The job's id is its token: it writes nothing once another refit is in charge (one revived
    after this one was taken for dead)."""
    store = job_store()
    token = get_current_job().id
    began = time.time()
    inputs = store.refits.inputs(campaign_id, token, began, start=True, workforce=True)
    if inputs is None:
        return {"campaign": campaign_id, "skipped": "not in charge (deleted or superseded)"}
    spec = inputs.spec
    # one output sampled by NUTS: its chains may go to idle workers (not several outputs, not
    # a large campaign's Laplace mixture, which has no chains to share, and not the
    # multi-fidelity model, whose chains run together here)
    alone = output_names(spec) or spec.get("fidelities")
    if not alone and not fitting.uses_laplace(spec, inputs.n):
        chains = spec["mcmc"]["chains"]
        where = fanout.chain_lane(
            fanout.lane(), inputs.previous, inputs.n, chains, get_settings().long_refit_seconds
        )
        free = fanout.free_workers(inputs.workforce, campaign_id, where)
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
    (:func:`service.jobs.fanout.dispatch`), tracked first so that a delete or a failure stops
    them (none enqueued if the campaign is gone)."""
    spec, n = inputs.spec, inputs.n
    warm = fitting.warm_start_of(spec, inputs.previous)
    timeout = costs.refit_timeout(spec, n, get_settings())
    job_ids, now = fanout.new_ids(groups), time.time()
    members = [f"refit:{j}" for j in job_ids]
    merge = None
    tracked = store.jobs.track(campaign_id, members, now, now + 2 * timeout)
    # the last is the merge: while it waits its turn, nothing beats for the refit
    if tracked and store.refits.note_merge(campaign_id, token, job_ids[-1]):
        merge = fanout.dispatch(
            store.r, campaign_id, n, groups, warm, token, began, timeout, where, job_ids
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
        outputs = len(sampled.fits or [None])

        def rank(found: Candidates) -> tuple[dict, list]:
            found_now = (found.pool, found.exclude, found.pending, found.failures, started)
            runs = {"labeled": found.labeled, "pending_x": found.pending_x}  # since, and out
            steps = fitting.ranked(spec, sampled, *found_now, **runs)
            work, timeout = costs.scoring(spec, n, get_settings(), outputs)
            share = share_scoring(store, campaign_id, work, timeout, found.workforce)
            return driven(steps, share)

        return rank

    return _under_lease(store, campaign_id, spec, n, token, began, fit)


def refit_chains(
    campaign_id: str, n: int, chain_ids: list[int], warm: dict | None, token: str
) -> dict | None:
    """One group of refit ``token``'s chains (on whichever worker takes it)."""
    store = job_store()
    inputs = store.refits.inputs(campaign_id, token, time.time())
    if inputs is None:
        return None  # another refit is in charge
    with lease(store, campaign_id, token):
        spec = inputs.spec
        data = fitting.prepare(spec, inputs.labels[:n])
        peers = fanout.Peers(token, chain_ids, spec["mcmc"]["chains"])
        try:
            draws, how = judged(store, fitting.grouped(spec, data, chain_ids, warm), peers)
        except BaseException:  # RQ's timeout and a stop included: the others must not wait
            note = peers.abandoned()
            if note is not None:
                with contextlib.suppress(RedisError):
                    store.groups.say(token, peers.me, note)
            raise
    return fanout.group_result(draws, how, warm)


def judged(store, steps: fitting.GroupSteps, peers: fanout.Peers) -> tuple:
    """A chain group's draws (:func:`worker.fitting.grouped`), its checks driven here: each
    published to the other groups (:meth:`service.store.groups.Groups.publish`), and, unless it has
    stopped, answered with every group's draws together once each has as many
    (:meth:`service.jobs.fanout.Peers.together`; meanwhile :func:`_wait`). The math so calls nothing
    of the jobs: the job calls it, and it answers with what it needs. Raises
    :class:`service.jobs.fanout.PeersLost` when the others cannot be heard."""
    groups, token = store.groups, peers.token
    try:
        check = next(steps)
        while True:
            note, draws = peers.note(check.theta, check.stopped)
            groups.publish(token, peers.me, note, draws, fanout.PEERS_TTL)
            together = None
            while not check.stopped and together is None:
                together = peers.together(check.theta, *groups.notes_and_draws(token))
                if together is None:
                    _wait(groups, peers)
            check = steps.send(together)
    except StopIteration as done:
        return done.value


def _wait(groups, peers: fanout.Peers) -> None:
    """Sleep until another group says something new or counts as stopped, or until the wait's
    patience is out (:meth:`service.jobs.fanout.Peers.until`), looking at their notes alone
    every ``poll`` seconds, and saying again now and then that this group is there."""
    seen = groups.notes(peers.token)
    while time.monotonic() < peers.until():
        time.sleep(peers.poll)
        if (again := peers.again()) is not None:
            groups.say(peers.token, peers.me, again)
        if peers.moved(seen, groups.notes(peers.token)):
            return


def refit_merge(campaign_id: str, n: int, job_ids: list[str], token: str, began: float) -> dict:
    """The chains' draws together: diagnostics, the mode, a warm start judged (and redone cold
    here if it did not mix), then scoring, ranking and the new model."""
    store = job_store()
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
            workforce = _may_share(spec, n)
            model, ranking = rank(
                store.models.candidates(campaign_id, spec, time.time(), workforce=workforce)
            )
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


def _may_share(spec: dict, n: int) -> bool:
    """Whether a refit's scoring, of at most ``pool_subsample`` candidates, may be worth parts
    (:func:`service.jobs.fanout.may_share`): only then are the workers read with its candidates."""
    work, _ = costs.scoring(spec, n, get_settings(), len(output_names(spec) or [None]))
    return fanout.may_share(int(spec.get("pool_subsample", POOL_SUBSAMPLE)), work)


def driven(steps: fitting.Steps, share) -> tuple[dict, list]:
    """A ranking's result (:func:`worker.fitting.ranked`), its steps driven here: each scoring
    (:class:`worker.fitting.ToScore`) through ``share`` (:func:`share_scoring`'s, which may score
    its parts on idle workers), its scores sent back to the ranking. The math so calls nothing of
    the jobs: the job calls it, and it answers with what it needs."""
    try:
        step = next(steps)
        while True:
            step = steps.send(share(step.fn, step.candidates))
    except StopIteration as done:
        return done.value


def share_scoring(store, campaign_id: str, work_per_candidate: float, timeout: int, workforce):
    """How a refit scores its candidates (:func:`driven`): in parts over the idle workers of
    its tenant's ordinary queue in ``workforce`` (read with the candidates), when the parts are
    worth it (:func:`service.jobs.fanout.scoring_parts`): the scoring and the parts' candidates
    kept in the store for the parts' jobs (:func:`score_part`) while they run
    (:func:`service.jobs.fanout.scored_in_parts`), then deleted. ``timeout``: the refit's,
    which its parts share (:func:`service.costs.scoring`)."""
    queue = ordinary(fanout.lane())  # a long refit's parts are no longer than an ordinary refit

    def share(fn, candidates):
        m = len(candidates)
        pieces = fanout.scoring_parts(m, work_per_candidate, workforce, campaign_id, queue)
        if pieces is None:
            return fn(candidates)
        kept, ttl = fanout.kept_parts(candidates, pieces), timeout + fanout.SHARE_KEEP
        key = store.groups.keep_scoring(json.dumps(fn.to_plain()), kept, ttl)
        try:
            return fanout.scored_in_parts(store.r, queue, key, fn, candidates, pieces, timeout)
        finally:
            store.groups.forget_scoring(key)

    return share


def score_part(key: str, start: int) -> dict:
    """A part of a refit's scoring that an idle worker took (:func:`share_scoring`): the scores of
    the candidates from ``start`` on that are kept under ``key``, packed
    (:func:`worker.scoring.pack`)."""
    scoring, part = job_store().groups.scoring_part(key, start)
    return fanout.part_scores(key, start, scoring, part)


def _failed(store, campaign_id: str, n: int, error: Exception, token: str) -> dict:
    """The campaign keeps its previous model and goes on."""
    message = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    with contextlib.suppress(NotFound):  # deleted meanwhile
        store.refits.fail(campaign_id, message, n, token, get_current_job().id)
    log.error("refit failed: %s", error, exc_info=error, extra=log_ids(campaign_id))
    return {"campaign": campaign_id, "n_labeled": n, "error": repr(error)}
