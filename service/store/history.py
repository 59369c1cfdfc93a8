"""A campaign's history: models, evaluations, failed refits, stops and resumes, and the runs
kept, as ``/history`` answers them."""

from __future__ import annotations

import json
import logging

log = logging.getLogger("fbgp.store")


class History:
    """A campaign's history of events
    (a part of :class:`service.store.CampaignStore`)."""

    def history(self, campaign_id: str) -> list[dict]:
        """The models, evaluations, failed refits, stops and resumes, oldest first (what the
        stopping rule and the pictures read; :meth:`events` adds the runs)."""
        self.spec(campaign_id)
        return [json.loads(v) for v in self.r.lrange(self.k(campaign_id, "history"), 0, -1)]

    def events(self, campaign_id: str) -> list[dict]:
        """``/history``: :meth:`history` and the runs kept (:meth:`run_events`), by time. A
        store from before the runs had lists of their own holds its failed runs in both: the
        history's copies are left out."""
        history = [e for e in self.history(campaign_id) if e.get("event") != "run_failed"]
        return sorted(history + self.run_events(campaign_id), key=lambda e: e.get("at", 0.0))
