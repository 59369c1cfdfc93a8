"""Queue names, enqueueing by dotted name, job timeouts, waiting for a short job, stopping jobs,
and RQ's facts about a job and the workers; shared by the API and the workers (no torch)."""

from __future__ import annotations

import logging
import math
import time
import uuid
from datetime import UTC, datetime

from redis.exceptions import RedisError
from rq import Queue, Worker
from rq.command import send_stop_job_command
from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.job import Job, JobStatus
from rq.utils import utcparse

from service.errors import Busy, JobFailed, NotFound, ServiceError
from service.loop import JobFacts
from worker.defaults import MCMC_DEFAULTS

HIGH = "fbgp-high"  # predictions, acquisitions, evaluations: short, a client waits on them
REFIT = "fbgp-refit"  # NUTS refits and scoring
QUEUES = (HIGH, REFIT)  # workers serve them in this order
# what a job that ran out of memory says (Python's MemoryError; torch's and numpy's allocators)
OUT_OF_MEMORY = ("MemoryError", "can't allocate memory", "Unable to allocate")
log = logging.getLogger("fbgp.queues")


class TooLarge(ServiceError):
    """A short job ran out of the memory a job may use (``job_memory_mb``)."""

    status = 413


def refit_work(spec: dict, n: int) -> float:
    """A refit's work in NUTS iterations of a campaign of at most 100 labels: chains x (warm-up
    + the most samples a chain may draw), twice (a warm start that did not mix is redone cold),
    times ``1 + (n / 100)^3`` for ``n`` labels (a Cholesky factor per gradient)."""
    mcmc = dict(MCMC_DEFAULTS, **spec.get("mcmc", {}))
    most = mcmc["samples"]
    if mcmc.get("draws") is not None:  # sampling to a target: up to max_samples per chain
        most = max(most, mcmc["max_samples"])
    return 2.0 * mcmc["chains"] * (mcmc["warmup"] + most) * (1.0 + (n / 100.0) ** 3)


def refit_timeout(spec: dict, n: int, settings) -> int:
    """The RQ timeout of a refit (and of its chain groups and merge) on ``n`` labels, seconds."""
    seconds = settings.job_timeout_seconds + settings.refit_iteration_seconds * refit_work(spec, n)
    return math.ceil(min(seconds, settings.job_timeout_max_seconds))


def short_timeout(points: int, n: int, wait_seconds: float, settings) -> int:
    """The RQ timeout of a short job asked about ``points`` points of a campaign with ``n``
    labels: never longer than the API waits for its answer."""
    work = points * (1.0 + (n / 100.0) ** 2)
    seconds = settings.job_timeout_seconds + settings.short_point_seconds * work
    return max(1, math.ceil(min(seconds, wait_seconds, settings.job_timeout_max_seconds)))


def enqueue_refit(connection, campaign_id: str, job_id: str, timeout: int = 3600):
    return Queue(REFIT, connection=connection).enqueue_call(
        "worker.jobs.refit", args=(campaign_id,), timeout=timeout, result_ttl=600,
        failure_ttl=86400, job_id=job_id,
    )  # fmt: skip


def enqueue_short(connection, name: str, *args, timeout: int = 600, job_id: str | None = None):
    """A model-based answer (``predict``, ``acquisition``, ``evaluate``) on the high queue."""
    return Queue(HIGH, connection=connection).enqueue_call(
        f"worker.jobs.{name}", args=args, timeout=timeout, result_ttl=120, failure_ttl=600,
        job_id=job_id,
    )  # fmt: skip


def run_short(connection, name: str, *args, wait_seconds: float, retry_after: int):
    """Run a short job (:func:`enqueue_short`) about campaign ``args[0]`` on a worker and wait
    for its answer: its return value; :class:`JobFailed` if it failed (:class:`TooLarge` if it
    ran out of memory), :class:`Busy` (and the job stopped) if no worker answered within
    ``wait_seconds``. The job is noted among the campaign's, so that a delete stops it."""
    from service.settings import get_settings
    from service.store import CampaignStore

    settings = get_settings()
    store = CampaignStore(connection)
    campaign_id = args[0]
    points = len(args[1]) if len(args) > 1 and isinstance(args[1], list) else 0
    timeout = short_timeout(points, store.n_labeled(campaign_id), wait_seconds, settings)
    job_id, now = uuid.uuid4().hex, time.time()
    if not store.track_jobs(campaign_id, [f"short:{job_id}"], now, now + timeout + 60):
        raise NotFound(f"no campaign {campaign_id!r}")
    job = enqueue_short(connection, name, *args, timeout=timeout, job_id=job_id)
    deadline = time.monotonic() + wait_seconds
    delay = 0.005
    while time.monotonic() < deadline:
        status = job.get_status(refresh=True)
        if status == JobStatus.FINISHED:
            return job.return_value()
        if status in (JobStatus.FAILED, JobStatus.STOPPED, JobStatus.CANCELED):
            if _out_of_memory(job):
                raise TooLarge(f"the {name} job needed more memory than a job may use "
                               f"(job_memory_mb = {settings.job_memory_mb}); ask about fewer "
                               "points at once")  # fmt: skip
            raise JobFailed(f"the {name} job failed on the worker")
        time.sleep(delay)
        delay = min(0.05, delay * 1.5)
    stop_jobs(connection, [job.id])
    # every worker is busy (long refits): nothing is wrong with the request, so ask again
    raise Busy(f"no worker answered the {name} job within {wait_seconds:g} s (all busy); "
               "try again shortly", retry_after)  # fmt: skip


def _out_of_memory(job: Job) -> bool:
    result = job.latest_result()
    text = (result.exc_string if result is not None else None) or ""
    return any(mark in text for mark in OUT_OF_MEMORY)


def stop_jobs(connection, job_ids: list[str]) -> None:
    """Stop jobs: one running is killed on its worker (its work horse, at once: RQ marks it
    stopped), one waiting is canceled; one gone or ended already is left alone."""
    for job_id in job_ids:
        try:
            job = Job.fetch(job_id, connection=connection)
            status = job.get_status(refresh=False)
            if status == JobStatus.STARTED:
                send_stop_job_command(connection, job_id)
            elif status in (JobStatus.QUEUED, JobStatus.DEFERRED, JobStatus.SCHEDULED):
                job.cancel()
        except (NoSuchJobError, InvalidJobOperation):
            continue
        except RedisError as error:  # what is not stopped ends by itself: it is fenced off
            log.warning("job %s not stopped: %s", job_id, error)


def worker_count(connection) -> int:
    """The workers registered with RQ."""
    return len(Worker.all(connection=connection))


def job_facts(connection, job_id: str) -> JobFacts:
    """What :func:`service.loop.refit_dead` needs to know of a refit's job."""
    if not job_id:
        return JobFacts(alive=False, failed=False)
    return JobFacts(alive=job_alive(connection, job_id), failed=job_failed(connection, job_id))


def job_alive(connection, job_id: str, silent_seconds: float = 30.0) -> bool:
    """Whether a job is waiting in its queue (or for its dependencies or its time), on its way
    to a worker's work horse, or running on a worker that sent a heartbeat in the last
    ``silent_seconds`` (a busy worker sends one every ``job_monitoring_interval``; a dead one's
    registration outlives it by a minute)."""
    try:
        job = Job.fetch(job_id, connection=connection)
    except NoSuchJobError:
        return False
    status = job.get_status(refresh=False)
    if status in (JobStatus.DEFERRED, JobStatus.SCHEDULED):
        return True
    if status == JobStatus.QUEUED:
        queue = Queue(job.origin, connection=connection)
        if queue.get_job_position(job_id) is not None:
            return True
        # A worker took it and its work horse has not started it yet: until then RQ keeps it on
        # the queue's intermediate list. One still there a minute after it was first seen there
        # was dropped mid-dequeue (RQ's own rule, whose marker RQ's cleanup shares).
        transit = queue.intermediate_queue
        if job_id not in transit.get_job_ids():
            return False
        transit.set_first_seen(job_id)
        return not transit.should_be_cleaned_up(job_id)
    if status == JobStatus.STARTED and job.worker_name:
        beat = connection.hget(f"rq:worker:{job.worker_name}", "last_heartbeat")
        if beat is None:
            return False
        age = datetime.now(UTC) - utcparse(beat.decode()).replace(tzinfo=UTC)
        return age.total_seconds() < silent_seconds
    return False


def job_failed(connection, job_id: str) -> bool:
    """Whether a job ended without success (failed, stopped or canceled)."""
    try:
        status = Job.fetch(job_id, connection=connection).get_status(refresh=False)
    except NoSuchJobError:
        return False
    return status in (JobStatus.FAILED, JobStatus.STOPPED, JobStatus.CANCELED)
