"""Queue names and enqueueing by dotted name, shared by the API and the workers (no torch)."""

from __future__ import annotations

from rq import Queue
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus

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


def job_alive(connection, job_id: str) -> bool:
    """Whether a job is waiting or running on a live worker."""
    try:
        job = Job.fetch(job_id, connection=connection)
    except NoSuchJobError:
        return False
    status = job.get_status(refresh=False)
    if status in (JobStatus.QUEUED, JobStatus.DEFERRED, JobStatus.SCHEDULED):
        return True
    if status == JobStatus.STARTED:
        return bool(job.worker_name) and bool(connection.exists(f"rq:worker:{job.worker_name}"))
    return False


def job_failed(connection, job_id: str) -> bool:
    """Whether a job ended without success (failed, stopped or canceled)."""
    try:
        status = Job.fetch(job_id, connection=connection).get_status(refresh=False)
    except NoSuchJobError:
        return False
    return status in (JobStatus.FAILED, JobStatus.STOPPED, JobStatus.CANCELED)
