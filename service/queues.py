"""Queue names, enqueueing by dotted name, waiting for a short job, and RQ's facts about a job
and the workers; shared by the API and the workers (no torch)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from rq import Queue, Worker
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus
from rq.utils import utcparse

from service.errors import Busy, JobFailed
from service.loop import JobFacts

HIGH = "fbgp-high"  # predictions, acquisitions, evaluations: short, a client waits on them
REFIT = "fbgp-refit"  # NUTS refits and scoring
QUEUES = (HIGH, REFIT)  # workers serve them in this order


def enqueue_refit(connection, campaign_id: str, job_id: str):
    return Queue(REFIT, connection=connection).enqueue_call(
        "worker.jobs.refit", args=(campaign_id,), timeout=3600, result_ttl=600,
        failure_ttl=86400, job_id=job_id,
    )  # fmt: skip


def enqueue_short(connection, name: str, *args):
    """A model-based answer (``predict``, ``acquisition``, ``evaluate``) on the high queue."""
    return Queue(HIGH, connection=connection).enqueue_call(
        f"worker.jobs.{name}", args=args, timeout=600, result_ttl=120, failure_ttl=600
    )


def run_short(connection, name: str, *args, wait_seconds: float, retry_after: int):
    """Run a short job (:func:`enqueue_short`) on a worker and wait for its answer: its return
    value; :class:`JobFailed` if it failed, :class:`Busy` (and the job dropped) if no worker
    answered within ``wait_seconds``."""
    job = enqueue_short(connection, name, *args)
    deadline = time.monotonic() + wait_seconds
    delay = 0.005
    while time.monotonic() < deadline:
        status = job.get_status(refresh=True)
        if status == JobStatus.FINISHED:
            return job.return_value()
        if status in (JobStatus.FAILED, JobStatus.STOPPED, JobStatus.CANCELED):
            raise JobFailed(f"the {name} job failed on the worker")
        time.sleep(delay)
        delay = min(0.05, delay * 1.5)
    job.cancel()
    # every worker is busy (long refits): nothing is wrong with the request, so ask again
    raise Busy(f"no worker answered the {name} job within {wait_seconds:g} s (all busy); "
               "try again shortly", retry_after)  # fmt: skip


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
