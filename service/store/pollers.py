"""The wake-ups of ``/next``'s long polls: whatever changes a campaign's answer to ``/next``
(a label, a failed run, a ticket withdrawn, a model stored) tells the API processes so
(:data:`service.keys.WAKE_CHANNEL`; :mod:`service.wakeups` listens)."""

from __future__ import annotations

import logging

from redis.exceptions import RedisError

from fbgp_al.service.keys import WAKE_CHANNEL
from fbgp_al.service.store.noun import Noun

log = logging.getLogger("fbgp.store")


class Pollers(Noun):
    """The campaigns' long polls, woken when their answer may have changed."""

    def wake(self, campaign_id: str) -> None:
        """Tell the API processes' long polls of the campaign's ``/next`` that its answer may
        have changed (:data:`WAKE_CHANNEL`). A message lost (Redis away for a moment) costs a
        poll at most its fallback interval, so a failure here is logged, never raised: what
        was stored stays stored."""
        try:
            self.r.publish(WAKE_CHANNEL, campaign_id)
        except RedisError as error:
            log.warning("wake-up of campaign %s not published: %s", campaign_id, error)
