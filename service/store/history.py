"""A campaign's history: models, evaluations, failed refits, stops and resumes, and the runs
kept, as ``/history`` answers them. Each kind is kept to its latest: the history's events
(``keep_history``), the evaluations (``keep_evaluations``, a list of their own, so that
evaluations never push out the models the stopping rule reads) and the runs (``keep_runs``)."""

from __future__ import annotations

import heapq
import json
import logging

from fbgp_al.service.store.campaigns import Campaigns
from fbgp_al.service.store.noun import Noun
from fbgp_al.service.store.runs import Runs

log = logging.getLogger("fbgp.store")


def _at(event: dict) -> float:
    return event.get("at", 0.0)


class History(Noun):
    """A campaign's history of events."""

    campaigns: Campaigns
    runs: Runs

    def read(self, campaign_id: str, evaluations: bool = True) -> list[dict]:
        """The models, evaluations (unless ``evaluations`` is False), failed refits, stops and
        resumes kept, oldest first (what the stopping rule and the pictures read; :meth:`events`
        adds the runs). The history's own order stands; the evaluations go in by time."""
        self.campaigns.spec(campaign_id)
        pipe = self.r.pipeline(transaction=True)
        pipe.lrange(self.k(campaign_id, "history"), 0, -1)
        if evaluations:
            pipe.lrange(self.k(campaign_id, "evaluations"), 0, -1)
        history, *kept = pipe.execute()
        history = [json.loads(v) for v in history]
        if not kept:
            return history
        return list(heapq.merge(history, [json.loads(v) for v in kept[0]], key=_at))

    def events(self, campaign_id: str) -> list[dict]:
        """``/history``: :meth:`read` and the runs kept (:meth:`service.store.runs.Runs.events`),
        by time. A store from before the runs had lists of their own holds its failed runs in
        both: the history's copies are left out."""
        history = [e for e in self.read(campaign_id) if e.get("event") != "run_failed"]
        return sorted(history + self.runs.events(campaign_id), key=_at)
