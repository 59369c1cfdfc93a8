"""A refit's lease: its heartbeat, kept fresh in its campaign's state while it runs, so that a
refit whose worker died is taken for dead (:func:`service.supervision.refit_dead`) and revived."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import time
from datetime import UTC, datetime

from redis.exceptions import RedisError
from rq import get_current_job

from fbgp_al.service.settings import get_settings
from fbgp_al.service.store import CampaignStore

log = logging.getLogger("fbgp.worker")


def log_ids(campaign_id: str, **more) -> dict:
    """A log line's ``extra``: the campaign and the current job."""
    job = get_current_job()
    return {"campaign": campaign_id, "job": job.id if job else None, **more}


def _deadline(grace: float) -> float:
    """When (``time.monotonic()``) the current job is past its RQ timeout by ``grace``
    seconds; infinity outside a job or without a timeout."""
    job = get_current_job()
    if job is None or not job.timeout or job.timeout < 0 or job.started_at is None:
        return math.inf
    started = job.started_at if job.started_at.tzinfo else job.started_at.replace(tzinfo=UTC)
    ran = (datetime.now(UTC) - started).total_seconds()
    return time.monotonic() + job.timeout - ran + grace


@contextlib.contextmanager
def lease(store: CampaignStore, campaign_id: str, token: str):
    """Keep refit ``token``'s heartbeat fresh while the block runs. Should this job's worker die,
    the job (a forked work horse) exits too: its refit is revived elsewhere. Should the refit no
    longer be in charge (its campaign deleted or failed, or the refit taken for dead and revived),
    the job exits too: nothing it could write would be taken. And should the job run a
    heartbeat past its RQ timeout (whose exception, raised by a signal, may strike where it is
    swallowed), it exits: a refit out of time fails, whatever it was doing."""
    every = get_settings().heartbeat_seconds
    parent = os.getppid()
    stop = threading.Event()
    deadline = _deadline(every)

    def beat() -> None:
        while not stop.wait(every):
            if os.getppid() != parent:
                log.error("the worker died; this refit is abandoned", extra=log_ids(campaign_id))
                os._exit(70)
            if time.monotonic() > deadline:
                log.error("the job ran out of time; it stops", extra=log_ids(campaign_id))
                os._exit(76)
            try:
                in_charge = store.refits.beat(campaign_id, token, time.time())
            except RedisError:
                continue
            if not in_charge and not stop.is_set():
                log.warning(
                    "this refit is no longer in charge (deleted, failed or superseded); it stops",
                    extra=log_ids(campaign_id),
                )
                os._exit(75)

    thread = threading.Thread(target=beat, name="refit-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
