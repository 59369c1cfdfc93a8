"""Queue names and enqueueing by dotted name, shared by the API and the workers (no torch)."""

from __future__ import annotations

from datetime import UTC, datetime

from rq import Queue
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus
from rq.utils import utcparse

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
