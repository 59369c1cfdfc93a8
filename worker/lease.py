"""A refit's lease: its heartbeat, kept fresh in its campaign's state while it runs, so that a
refit whose worker died is taken for dead (:func:`service.loop.refit_dead`) and revived."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time

from redis.exceptions import RedisError
from rq import get_current_job

from service.settings import get_settings
from service.store import CampaignStore

log = logging.getLogger("fbgp.worker")


def log_ids(campaign_id: str, **more) -> dict:
    """A log line's ``extra``: the campaign and the current job."""
    job = get_current_job()
    return {"campaign": campaign_id, "job": job.id if job else None, **more}


@contextlib.contextmanager
def lease(store: CampaignStore, campaign_id: str, token: str):
    """Keep refit ``token``'s heartbeat fresh while the block runs. Should this job's worker die,
    the job (a forked work horse) exits too: its refit is revived elsewhere."""
    every = get_settings().heartbeat_seconds
    parent = os.getppid()
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every):
            if os.getppid() != parent:
                log.error("the worker died; this refit is abandoned", extra=log_ids(campaign_id))
                os._exit(70)
            with contextlib.suppress(RedisError):
                store.beat(campaign_id, token, time.time())

    thread = threading.Thread(target=beat, name="refit-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
