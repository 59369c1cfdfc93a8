"""A model call's story (``/predict``, ``/acquisition``, ``/evaluate``, ``/sensitivity``, a
page's picture): admitted against the campaign's and the stack's limits, enqueued as a short
job on the high queue (:func:`service.queues.enqueue_short`), waited for, and its answer, its
failure or its want of a worker said (:func:`run_short`)."""

from __future__ import annotations

import contextlib
import json
import math
import time
import uuid
import zlib

from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus

from fbgp_al.service import costs, keys
from fbgp_al.service.job_results import forget
from fbgp_al.service.queues import enqueue_short, fetch_job, stop_jobs, worker_count
from fbgp_al.service.refusals import Busy, JobFailed, NotFound, TooLarge, TooMany
from fbgp_al.service.settings import get_settings
from fbgp_al.worker.vocabulary.defaults import log_outputs

OUT_OF_MEMORY = ("MemoryError", "can't allocate memory", "Unable to allocate")


# counted against limit_model_calls
MODEL_CALLS = ("predict", "acquisition", "evaluate", "sensitivity")
PAGE_PLOTS = 6  # a campaign's plots out at once beyond its model calls: as many as a browser
# fetches from one host at once (6 connections over HTTP/1.1), of one page's (pages.PLOTS)


def run_short(store, name: str, *args, wait_seconds: float, retry_after: int):
    """Run a short job (:func:`enqueue_short`) about campaign ``args[0]`` on a worker and wait
    for its answer: its return value; :class:`JobFailed` if it failed (:class:`TooLarge` if it
    ran out of memory), :class:`Busy` (and the job stopped) if no worker answered within
    ``wait_seconds``. The job is noted among the campaign's while it runs, so that a delete
    stops it; a model call (:data:`MODEL_CALLS`) beyond the campaign's ``limit_model_calls``
    short jobs out at once, or a plot beyond that many and :data:`PAGE_PLOTS` more, is
    :class:`TooMany`, and one beyond the stack's ``model_call_share`` of its workers (across
    campaigns and teams) :class:`Busy`, so that model calls cannot keep the workers from the
    campaigns' refits (workers serve the high queue first). ``store``: the campaign store
    (:class:`service.store.CampaignStore`) on the queues' connection."""
    settings = get_settings()
    connection = store.r
    campaign_id = args[0]
    points = len(args[1]) if len(args) > 1 and isinstance(args[1], list) else 0
    log_points = 0
    with contextlib.suppress(NotFound):  # each output answers; a log one's quantiles cost more
        spec = store.campaigns.spec(campaign_id)
        log_points = points * len(log_outputs(spec))
        points *= len(spec.get("outputs") or [None])
    n = store.campaigns.n_labeled(campaign_id)
    timeout = costs.short_timeout(points, n, wait_seconds, settings)
    long = name in MODEL_CALLS and costs.long_call(name, points, n, settings, log_points)
    if kept_call(name, args):  # work as the labels squared, kept: it may outlast the wait
        estimate = settings.job_timeout_seconds + 2 * costs.call_seconds("sensitivity", points, n)
        timeout = max(timeout, math.ceil(estimate))
    job_id, now = uuid.uuid4().hex, time.time()
    member = f"short:{job_id}"
    most = settings.limit_model_calls + (PAGE_PLOTS if name == "plot" else 0)
    workers = worker_count(connection)
    share = max(1, math.floor(workers * settings.model_call_share))
    stack = share if name in MODEL_CALLS else None  # a page's plots: bounded per campaign
    admitted = store.jobs.admit_short(campaign_id, member, now, now + timeout + 60, most, stack)
    if admitted == 0:
        raise NotFound(f"no campaign {campaign_id!r}")
    if admitted == -2:
        raise Busy(
            f"model calls hold {share} of the stack's {workers} worker(s), their share "
            "(model_call_share, env FBGP_MODEL_CALL_SHARE): the others refit; ask again "
            "shortly",
            retry_after,
        )
    if admitted < 0:
        raise TooMany(
            f"campaign {campaign_id!r} has {most} model call(s) running, as many as "
            "it may (limit_model_calls, env FBGP_LIMIT_MODEL_CALLS); ask again when "
            "one has answered",
            retry_after=1,
        )
    try:
        return _wait_short(
            connection,
            name,
            args,
            job_id,
            timeout,
            wait_seconds,
            retry_after,
            settings.job_memory_mb,
            long,
        )
    except JobFailed:  # stopped by a delete of its campaign, or failed on not finding it
        if not connection.exists(keys.campaign(campaign_id, "spec")):
            raise NotFound(
                f"no campaign {campaign_id!r}: it was deleted while its {name} job ran"
            ) from None
        raise
    finally:
        store.jobs.forget(campaign_id, [member])


def kept_call(name: str, args: tuple) -> str | None:
    """The key under which a call whose answer its job keeps for the model's version (the Sobol
    indices, :mod:`service.jobs.calls`: ``/sensitivity`` and the Sobol picture) notes its job
    left running past the wait; None for another call."""
    if name != "sensitivity" and args[1:2] != ("sobol",):
        return None
    digest = zlib.crc32(json.dumps([name, *args[1:]]).encode())
    return f"{keys.PREFIX}kept-call:{args[0]}:{digest:08x}"


def _running(connection, kept: str | None) -> Job | None:
    """The job of the same call left running past an earlier wait, if it still runs."""
    job_id = connection.get(kept) if kept else None
    if job_id is None:
        return None
    with contextlib.suppress(NoSuchJobError):
        job = fetch_job(job_id.decode(), connection)
        if job.get_status(refresh=True) in (JobStatus.QUEUED, JobStatus.STARTED):
            return job
    return None


def _wait_short(
    connection, name, args, job_id, timeout, wait_seconds, retry_after, memory_mb, long
):
    kept = kept_call(name, args)
    job = _running(connection, kept)  # the same call's, left running: wait for it instead
    if job is None:
        job = enqueue_short(connection, name, *args, timeout=timeout, job_id=job_id, long=long)
    deadline = time.monotonic() + wait_seconds
    delay = 0.005
    while time.monotonic() < deadline:
        status = job.get_status(refresh=True)
        if status == JobStatus.FINISHED:
            value = job.return_value()
            forget(connection, [job.id])  # read: its points and answer expire now
            return value
        if status in (JobStatus.FAILED, JobStatus.STOPPED, JobStatus.CANCELED):
            if _out_of_memory(job):
                raise TooLarge(
                    f"the {name} job needed more memory than a job may use "
                    f"(job_memory_mb = {memory_mb}); ask about fewer points at "
                    "once"
                )
            raise JobFailed(f"the {name} job failed on the worker")
        time.sleep(delay)
        delay = min(0.05, delay * 1.5)
    if kept and job.get_status(refresh=True) == JobStatus.STARTED:
        # its answer is kept for the model: stopped, every ask would start it again
        connection.set(kept, job.id, ex=max(1, math.ceil(timeout)) + 60)
        raise Busy(
            f"the {name} job is still computing after {wait_seconds:g} s; it goes on, and "
            "the next ask waits for it or reads the answer it keeps",
            retry_after,
        )
    stop_jobs(connection, [job.id])
    # every worker is busy (long refits): nothing is wrong with the request, so ask again
    raise Busy(
        f"no worker answered the {name} job within {wait_seconds:g} s (all busy); "
        "try again shortly",
        retry_after,
    )


def _out_of_memory(job: Job) -> bool:
    result = job.latest_result()
    text = (result.exc_string if result is not None else None) or ""
    return any(mark in text for mark in OUT_OF_MEMORY)
