"""Queue names and enqueueing by dotted name, shared by the API and the workers (no torch)."""

from __future__ import annotations

from rq import Queue

HIGH = "fbgp-high"  # predictions, acquisitions, evaluations: short, a client waits on them
REFIT = "fbgp-refit"  # NUTS refits and scoring
QUEUES = (HIGH, REFIT)  # workers serve them in this order


def enqueue_refit(connection, campaign_id: str):
    return Queue(REFIT, connection=connection).enqueue_call(
        "worker.jobs.refit", args=(campaign_id,), timeout=3600, result_ttl=600, failure_ttl=86400
    )


def enqueue_short(connection, name: str, *args):
    """A model-based answer (``predict``, ``acquisition``, ``evaluate``) on the high queue."""
    return Queue(HIGH, connection=connection).enqueue_call(
        f"worker.jobs.{name}", args=args, timeout=600, result_ttl=120, failure_ttl=600
    )
