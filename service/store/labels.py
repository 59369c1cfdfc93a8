"""Labels: one posted for a ticket (``label.lua``), and observations imported
(``import.lua``) with their Idempotency-Key."""

from __future__ import annotations

import json
import logging
import time

from fbgp_al.service import loop
from fbgp_al.service.keys import PHASES
from fbgp_al.service.loop import ImportOutcome, LabelOutcome
from fbgp_al.service.refusals import NotFound
from fbgp_al.service.settings import get_settings
from fbgp_al.service.store.campaigns import Campaigns
from fbgp_al.service.store.counters import Counters
from fbgp_al.service.store.noun import Noun
from fbgp_al.service.store.pollers import Pollers
from fbgp_al.worker.vocabulary import fidelities, pools

log = logging.getLogger("fbgp.store")


def _held_import(held: bytes, digest: str) -> tuple[ImportOutcome, int, int]:
    """An import's record under its Idempotency-Key (``digest n count``), as
    :meth:`Labels.imported` answers it."""
    stored, n, count = held.decode().split()
    outcome = ImportOutcome.SAME_AGAIN if stored == digest else ImportOutcome.KEY_REUSED
    return outcome, int(n), int(count)


class Labels(Noun):
    """Labels posted and observations imported."""

    campaigns: Campaigns
    pollers: Pollers
    counters: Counters

    def all(self, campaign_id: str) -> list[dict]:
        return [json.loads(v) for v in self.r.lrange(self.k(campaign_id, "labels"), 0, -1)]

    def record(
        self,
        campaign_id: str,
        ticket: str,
        y,
        now: float,
        noise=None,
        spec: dict | None = None,
    ) -> tuple[LabelOutcome, int, bool]:
        """Store the label of ``ticket`` (:func:`service.store.rules.label_outcome`, atomically),
        wake the campaign's pollers and count it: ``(outcome, n_labeled, refit_due)``; the refit
        it makes due is queued in the campaign's state, for the caller to put on the queue
        (:meth:`service.store.refits.Refits.requested`). ``noise``: its known noise variance,
        kept in the record (and in the ticket's state, for a repeat to match). ``spec``: the
        campaign's, if the caller read it (checked ``y`` and ``noise`` against it)."""
        spec = self.campaigns.spec(campaign_id) if spec is None else spec
        raw = self.r.hget(self.k(campaign_id, "tickets"), ticket)
        if raw is None:
            n = self.r.llen(self.k(campaign_id, "labels"))
            return LabelOutcome.UNKNOWN_TICKET, int(n), False
        info = json.loads(raw)
        fields = {"x": info["x"], "y": y, "index": info["index"], "ticket": ticket}
        if noise is not None:
            fields["noise"] = noise
        record = json.dumps(fields)
        index = "" if info["index"] is None else str(info["index"])
        keys = [
            self.k(campaign_id, p)
            for p in ("tickets", "ticket_state", "leases", "labels", "labeled", "state")
        ]
        keys += [PHASES, self.k(campaign_id, "expired")]
        repeats = "1" if spec["allow_repeats"] else "0"
        state = loop.labeled_state(y, noise).removeprefix("labeled:")
        args = [
            ticket,
            state,
            record,
            index,
            spec["max_labels"],
            repeats,
            spec["initial_design"]["size"],
            now,
        ]
        outcome, n, due = self.s.label(keys=keys, args=args)
        self.pollers.wake(campaign_id)
        outcome = LabelOutcome(outcome.decode())
        if outcome == LabelOutcome.STORED:
            self.counters.count_labels(1)
        return outcome, int(n), bool(due)

    def imported(
        self, campaign_id: str, key: str, digest: str
    ) -> tuple[ImportOutcome, int, int] | None:
        """What became of the import with Idempotency-Key ``key``: None if none was stored;
        else ``(SAME_AGAIN, n_labeled after it, its count)``, or ``KEY_REUSED`` if it had other
        observations than those of SHA-256 ``digest``."""
        held = self.r.hget(self.k(campaign_id, "imports"), key)
        return None if held is None else _held_import(held, digest)

    def import_observations(
        self,
        campaign_id: str,
        x: list,
        y: list,
        now: float,
        noise: list | None = None,
        key: str | None = None,
        digest: str = "",
    ) -> tuple[ImportOutcome, int, bool]:
        """Store imported observations, all or none (``import_observations.lua``), wake the
        pollers and count them (the refit they make due is queued for the caller to put on the
        queue, as :meth:`record`'s): ``(outcome, n_labeled, refit_due)``; ``noise``:
        their known noise variances. With
        an Idempotency-Key ``key`` (and the SHA-256 ``digest`` of the observations), an import
        whose key was stored before is :meth:`imported`'s answer instead, nothing stored."""
        spec = self.campaigns.spec(campaign_id)
        n = self.campaigns.n_labeled(campaign_id)
        if n + len(x) > spec["max_labels"]:  # before the look-up (the script checks again)
            held = self.imported(campaign_id, key, digest) if key else None  # stored meanwhile
            return (ImportOutcome.TOO_MANY, n, False) if held is None else held[:2] + (False,)
        index = pools.pool_index_of(spec, self.campaigns.pool(campaign_id, spec), x)
        args: list = [len(x), spec["max_labels"], spec["initial_design"]["size"]]
        noises = [None] * len(y) if noise is None else noise
        for xi, yi, ii, ni in zip(x, y, index, noises, strict=True):
            record = {"x": xi, "y": yi, "index": ii, "ticket": None}
            if ni is not None:
                record["noise"] = ni
            args += [json.dumps(record), "" if ii is None else str(ii)]
        args += [now, "1" if spec["allow_repeats"] else "0", key or "", digest]
        keys = [self.k(campaign_id, p) for p in ("labels", "labeled", "state")] + [PHASES]
        keys += [self.k(campaign_id, "spec"), self.k(campaign_id, "imports")]
        outcome, n, due, *held = self.s.import_observations(keys=keys, args=args)
        if outcome == b"gone":
            raise NotFound(f"no campaign {campaign_id!r}")
        if outcome == b"held":  # the same key, stored between imported() and here
            return _held_import(held[0], digest)[:2] + (False,)
        self.pollers.wake(campaign_id)
        if outcome == ImportOutcome.STORED.value.encode():
            self.counters.count_labels(len(y))
        return ImportOutcome(outcome.decode()), int(n), bool(due)

    def stop_at_cost(self, campaign_id: str, spec: dict) -> bool:
        """Whether the campaign is stopped now (``stop_at_cost.lua``) because its labels' cost
        (:func:`worker.vocabulary.fidelities.spent`) reached its ``max_cost``: its status's
        ``stopped_by`` says ``max_cost``, and ``/next`` answers 410."""
        if not spec.get("max_cost"):
            return False
        labels = self.all(campaign_id)
        spent = fidelities.spent(spec, labels)
        if spent < spec["max_cost"]:
            return False
        n, now = len(labels), time.time()
        verdict = {"rule": "max_cost", "value": spent, "target": spec["max_cost"], "version": n}
        event = dict(verdict, event="stopped", n_labeled=n, at=now)
        keys = [self.k(campaign_id, p) for p in ("state", "history", "labels")]
        keys += [PHASES, self.k(campaign_id, "spec")]
        args = [json.dumps(dict(verdict, at=now)), json.dumps(event)]
        args += [spec["initial_design"]["size"], spec["max_labels"], get_settings().keep_history]
        stopped = bool(self.s.stop_at_cost(keys=keys, args=args))
        if stopped:
            log.info("campaign stopped: its labels cost %g", spent, extra={"campaign": campaign_id})
            self.pollers.wake(campaign_id)
        return stopped
