"""Tickets: issued for ``/next`` (``issue.lua``), bound to its Idempotency-Key
(``claim.lua``, ``replay.lua``), withdrawn, expired and pruned (``expire.lua``); the
snapshot ``/next`` decides from."""

from __future__ import annotations

import json
import logging
import uuid

from fbgp_al.service.loop import Refit, Snapshot, Ticket
from fbgp_al.service.refusals import NotFound
from fbgp_al.service.settings import get_settings
from fbgp_al.service.store.noun import Noun
from fbgp_al.service.store.pollers import Pollers

log = logging.getLogger("fbgp.store")
EXPIRED_PRUNE_BATCH = 1000  # expired tickets pruned per look at most


def _ticket_of(found: list) -> Ticket:
    """A ticket out, from a script's ``{ticket, info, expiry}``."""
    ticket, info, expiry = found
    info = json.loads(info)
    return _ticket(ticket.decode(), info, float(expiry))


def _ticket(ticket: str, info: dict, expiry: float) -> Ticket:
    """A ticket of ``info`` (as stored): with fidelities (``fidelity`` in it), its point as
    declared and its level apart."""
    if "fidelity" in info:
        return Ticket(ticket, info["x"][:-1], expiry, info["model_version"], info["fidelity"])
    return Ticket(ticket, info["x"], expiry, info["model_version"])


class Tickets(Noun):
    """Tickets out, their Idempotency-Keys and their expiry; ``/next``'s snapshot."""

    pollers: Pollers

    def issue(
        self,
        campaign_id: str,
        offers: list[tuple[int | str | None, list[float], int | None]],
        lease: float,
        now: float,
        levels: bool = False,
    ) -> list[Ticket]:
        """A ticket for each ``(index, x, model_version)``, leased for ``lease`` seconds, in
        one round trip; the tickets. ``levels``: the campaign has fidelities (each ``x``'s last
        value is its level's name, kept apart in the ticket too, ``fidelity``). An ``index``
        that is a text is the key of a point off the pool (:mod:`worker.fitting.search`): its
        ticket has no pool index but that ``point``, and the key is kept as handed out
        (``offered``), never to be handed out again."""
        args: list = []
        out = []
        for index, x, version in offers:
            ticket = uuid.uuid4().hex
            point = index if isinstance(index, str) else None
            info = {
                "x": x,
                "index": None if point is not None else index,
                "issued_at": now,
                "expires_at": now + lease,
                "model_version": version,
            }
            if levels:
                info["fidelity"] = x[-1]
            if point is not None:
                info["point"] = point
            args += [ticket, json.dumps(info), now + lease, point or ""]
            out.append(_ticket(ticket, info, now + lease))
        parts = ("spec", "tickets", "ticket_state", "leases", "offered")
        keys = [self.k(campaign_id, p) for p in parts]
        if args and not self.s.issue(keys=keys, args=args):  # deleted meanwhile: nothing written
            raise NotFound(f"no campaign {campaign_id!r}")
        return out

    def replay(self, campaign_id: str, key: str, now: float) -> Ticket | None:
        """The ticket that answered the ``/next`` with Idempotency-Key ``key`` (with its lease
        as renewed), while it is out; None otherwise."""
        found = self.s.replay(keys=self._request_keys(campaign_id), args=[key, now])
        return None if found is None else _ticket_of(found)

    def claim(self, campaign_id: str, key: str, ticket: Ticket, now: float) -> Ticket:
        """Bind Idempotency-Key ``key`` to ``ticket`` (an answer of :meth:`issue`), and return
        the ticket the key answers: ``ticket``, or one issued for the same key before and still
        out, in which case ``ticket`` is withdrawn (``claim.lua``)."""
        keys = self._request_keys(campaign_id) + [self.k(campaign_id, "spec")]
        found = self.s.claim(keys=keys, args=[key, ticket.ticket, now])
        if found is None:
            raise NotFound(f"no campaign {campaign_id!r}")
        winner = _ticket_of(found)
        if winner.ticket != ticket.ticket:
            self.withdraw(campaign_id, [ticket.ticket])
        return winner

    def level(self, campaign_id: str, ticket: str) -> str | None:
        """The level ticket ``ticket`` was issued for (None: an unknown ticket, or a campaign of
        one fidelity)."""
        raw = self.r.hget(self.k(campaign_id, "tickets"), ticket)
        return None if raw is None else json.loads(raw).get("fidelity")

    def _request_keys(self, campaign_id: str) -> list[str]:
        return [self.k(campaign_id, p) for p in ("requests", "ticket_state", "leases", "tickets")]

    def withdraw(self, campaign_id: str, tickets: list[str]) -> None:
        """Take back tickets that no simulator received (their poll ended before it could be
        answered): gone as if never issued, their points free again at once."""
        pipe = self.r.pipeline()
        for part in ("tickets", "ticket_state"):
            pipe.hdel(self.k(campaign_id, part), *tickets)
        pipe.zrem(self.k(campaign_id, "leases"), *tickets)
        pipe.execute()
        self.pollers.wake(campaign_id)

    def snapshot(self, campaign_id: str, now: float, expire: bool = True) -> Snapshot:
        """The labels, the tickets out, the refit state, the latest ranking and the failed
        points as of one instant (one MULTI/EXEC; expired leases are dropped first, or with
        ``expire=False`` only left out), for :func:`service.loop.next_answer`. Read one at a
        time, a label stored in between would count neither as labeled nor as out, and one
        ticket too many could be handed out."""
        leases = self.k(campaign_id, "leases")
        pipe = self.r.pipeline(transaction=True)
        if expire:
            self.expire(campaign_id, now, pipe)
        pipe.zrangebyscore(leases, now, "+inf")
        pipe.llen(self.k(campaign_id, "labels"))
        pipe.smembers(self.k(campaign_id, "labeled"))
        pipe.hgetall(self.k(campaign_id, "state"))
        pipe.get(self.k(campaign_id, "ranking"))
        pipe.hgetall(self.k(campaign_id, "failed"))
        pipe.llen(self.k(campaign_id, "failures"))
        pipe.smembers(self.k(campaign_id, "offered"))
        *_, tickets, n, labeled, state, ranking, failed, kept, offered = pipe.execute()
        infos = self.r.hmget(self.k(campaign_id, "tickets"), tickets) if tickets else []
        infos = [json.loads(i) for i in infos if i is not None]
        state = {k.decode(): v.decode() for k, v in state.items()}
        state.setdefault("n_failed", str(kept))  # stored before the count: its list counts
        ranked = json.loads(ranking) if ranking else []
        return Snapshot(
            n_labeled=int(n),
            n_pending=len(tickets),
            pending=frozenset(i.get("point", i["index"]) for i in infos) - {None},
            labeled=frozenset(int(i) for i in labeled),
            refit=Refit.of(state),
            ranking=tuple(p["point"] if p["index"] is None else p["index"] for p in ranked),
            failures={int(i): int(c) for i, c in failed.items()},
            off_pool={p["point"]: p["x"] for p in ranked if p["index"] is None},
            offered=frozenset(k.decode() for k in offered),
            pending_x=tuple(i["x"] for i in infos if "point" in i),
        )

    def expire(self, campaign_id: str, now: float, client=None) -> int:
        """Expired leases leave ``leases`` for ``expired``; tickets expired or ended more than
        ``expired_ticket_seconds`` ago, and the oldest beyond the latest
        ``keep_ended_tickets``, are pruned unless labeled (``expire.lua``)."""
        settings = get_settings()
        keys = [self.k(campaign_id, p) for p in ("leases", "expired", "tickets", "ticket_state")]
        args = [
            now,
            now - settings.expired_ticket_seconds,
            EXPIRED_PRUNE_BATCH,
            settings.keep_ended_tickets,
        ]
        return self.s.expire(keys=keys, args=args, client=client)

    def n_pending(self, campaign_id: str, now: float) -> int:
        """How many tickets are out now (their lease not run out)."""
        return int(self.r.zcount(self.k(campaign_id, "leases"), now, "+inf"))
