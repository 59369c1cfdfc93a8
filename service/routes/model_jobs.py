"""The model jobs a request waits for (predictions, acquisition values, evaluations, the pages'
pictures), run on a worker (:func:`service.model_calls.run_short`)."""

from __future__ import annotations

from fbgp_al.service import model_calls
from fbgp_al.service.store import CampaignStore


def run_job(redis, settings, name: str, *args):
    """Run a model job on a worker and wait for its answer (503 when all are busy)."""
    return model_calls.run_short(
        CampaignStore(redis),
        name,
        *args,
        wait_seconds=settings.job_wait_seconds,
        retry_after=settings.busy_retry_after_seconds,
    )
