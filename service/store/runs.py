"""Runs without a label: failed (``fail_run.lua``) and abandoned (``abandon.lua``) runs, kept
and counted, and the renewal of a ticket's lease (``renew.lua``)."""

from __future__ import annotations

import json
import logging

from fbgp_al.service import loop
from fbgp_al.service.loop import RenewOutcome, RunOutcome
from fbgp_al.service.settings import get_settings
from fbgp_al.service.store.campaigns import Campaigns
from fbgp_al.service.store.counters import Counters
from fbgp_al.service.store.noun import Noun
from fbgp_al.service.store.pollers import Pollers

log = logging.getLogger("fbgp.store")
MAX_REASON = 2000  # characters of a failure's reason kept


def counted(failures: list[bytes], forgotten: bytes | None) -> list[dict]:
    """The failed runs kept that a failure model counts: all but those before the owner's
    retry that forgot them (``POST .../retry`` with ``forget_failures``)."""
    after = float(forgotten or "-inf")
    return [run for run in map(json.loads, failures) if float(run["at"]) > after]


class Runs(Noun):
    """Failed and abandoned runs, and the renewal of a ticket's lease."""

    campaigns: Campaigns
    pollers: Pollers
    counters: Counters

    def counted_failures(self, campaign_id: str) -> list[dict]:
        """The failed runs a failure model counts (:func:`counted`), as they are now."""
        pipe = self.r.pipeline(transaction=True)
        pipe.lrange(self.k(campaign_id, "failures"), 0, -1)
        pipe.hget(self.k(campaign_id, "state"), "failures_forgotten_at")
        return counted(*pipe.execute())

    def failures(self, campaign_id: str, last: int | None = None) -> list[dict]:
        """The failed runs kept (the latest ``keep_runs``), oldest first; with ``last``, only
        the last ``last`` of them."""
        start = 0 if last is None else -last
        return [json.loads(v) for v in self.r.lrange(self.k(campaign_id, "failures"), start, -1)]

    def n_failed(self, campaign_id: str, state: dict | None = None) -> int:
        """The campaign's failed runs, all counted (``state``: its state hash, if read)."""
        state = self.campaigns.state(campaign_id) if state is None else state
        if "n_failed" in state:
            return int(state["n_failed"])
        return int(self.r.llen(self.k(campaign_id, "failures")))  # stored before the count

    def events(self, campaign_id: str) -> list[dict]:
        """The failed and abandoned runs kept, as ``/history`` events, oldest first (each kind
        the latest ``keep_runs``)."""
        pipe = self.r.pipeline(transaction=True)
        pipe.lrange(self.k(campaign_id, "failures"), 0, -1)
        pipe.lrange(self.k(campaign_id, "abandons"), 0, -1)
        failures, abandons = pipe.execute()
        events = [dict(json.loads(v), event="run_failed") for v in failures]
        events += [json.loads(v) for v in abandons]
        return sorted(events, key=lambda e: e["at"])

    def _ticket(self, campaign_id: str, ticket: str) -> dict | None:
        raw = self.r.hget(self.k(campaign_id, "tickets"), ticket)
        return None if raw is None else json.loads(raw)

    def fail(
        self, campaign_id: str, ticket: str, reason: str, now: float, spec: dict | None = None
    ) -> tuple[RunOutcome, int, bool]:
        """Record that ``ticket``'s run failed (:func:`service.store.rules.fail_outcome`,
        atomically), wake the pollers and count it: ``(outcome, n_failed, refit_due)``; the
        refit it makes due is queued for the caller to put on the queue
        (:meth:`service.store.refits.Refits.requested`). ``spec``: the campaign's, if the caller
        read it."""
        spec = self.campaigns.spec(campaign_id) if spec is None else spec
        info = self._ticket(campaign_id, ticket)
        if info is None:
            return RunOutcome.UNKNOWN_TICKET, self.n_failed(campaign_id), False
        reason = reason[:MAX_REASON]
        record = {
            "x": info["x"],
            "index": info["index"],
            "ticket": ticket,
            "reason": reason,
            "at": now,
        }
        keys = [
            self.k(campaign_id, p)
            for p in ("ticket_state", "leases", "failures", "failed", "state", "expired", "labels")
        ]
        index = "" if info["index"] is None else str(info["index"])
        args = [
            ticket,
            loop.failed_state(reason),
            json.dumps(record),
            index,
            spec["initial_design"]["size"],
            now,
            get_settings().keep_runs,
            reason,
        ]
        outcome, n, due = self.s.fail_run(keys=keys, args=args)
        return self._ended(campaign_id, RunOutcome(outcome.decode()), int(n), bool(due), "failed")

    def abandon(
        self, campaign_id: str, ticket: str, now: float, spec: dict | None = None
    ) -> tuple[RunOutcome, int, bool]:
        """Abandon ``ticket`` (:func:`service.store.rules.abandon_outcome`, atomically): its
        point is free again; the pollers woken, the run counted:
        ``(outcome, n_abandoned, refit_due)``, as :meth:`fail`'s."""
        spec = self.campaigns.spec(campaign_id) if spec is None else spec
        info = self._ticket(campaign_id, ticket)
        event = {
            "event": "run_abandoned",
            "ticket": ticket,
            "at": now,
            "x": None if info is None else info["x"],
        }
        keys = [
            self.k(campaign_id, p)
            for p in ("ticket_state", "leases", "state", "abandons", "labels", "expired")
        ]
        args = [
            ticket,
            spec["initial_design"]["size"],
            now,
            json.dumps(event),
            get_settings().keep_runs,
        ]
        outcome, n, due = self.s.abandon(keys=keys, args=args)
        return self._ended(
            campaign_id, RunOutcome(outcome.decode()), int(n), bool(due), "abandoned"
        )

    def _ended(
        self, campaign_id: str, outcome: RunOutcome, n: int, due: bool, kind: str
    ) -> tuple[RunOutcome, int, bool]:
        """After a run ended without a label: the pollers woken, the run counted."""
        self.pollers.wake(campaign_id)
        if outcome == RunOutcome.STORED:
            self.counters.count_run(kind)
        return outcome, n, due

    def renew(self, campaign_id: str, ticket: str, now: float) -> tuple[RenewOutcome, float | None]:
        """Extend ``ticket``'s live lease by ``lease_seconds`` from now
        (:func:`service.store.rules.renew_outcome`): ``(outcome, expires_at)``."""
        spec = self.campaigns.spec(campaign_id)
        keys = [self.k(campaign_id, "ticket_state"), self.k(campaign_id, "leases")]
        outcome, expiry = self.s.renew(keys=keys, args=[ticket, now, now + spec["lease_seconds"]])
        return RenewOutcome(outcome.decode()), float(expiry) if expiry else None
