"""A campaign's RQ jobs, noted (``track.lua``, ``admit_short.lua``) so that a delete or a
failure can stop them; the workers as a refit counts them, and which campaigns want one."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from fbgp_al.service import queues
from fbgp_al.service.keys import SHORTS
from fbgp_al.service.store.campaigns import Campaigns
from fbgp_al.service.store.noun import Noun

log = logging.getLogger("fbgp.store")


@dataclass(frozen=True)
class Hand:
    """A worker as a refit counts it: its name, the queues it serves, its state (``idle``...)."""

    name: str
    queues: frozenset[str]
    state: str


@dataclass(frozen=True)
class Workforce:
    """The workers as they are (:meth:`Jobs.workforce`), for a refit to count the idle ones it
    may take (:func:`service.jobs.fanout.free_workers`): every worker, the jobs waiting on all
    queues, and the campaigns that want a worker (:meth:`Jobs.wanting_workers`; None when no
    more workers idle than jobs wait, so that no refit may take one)."""

    hands: tuple[Hand, ...]
    waiting: int
    wanting: frozenset[str] | None


class Jobs(Noun):
    """A campaign's RQ jobs, noted for a delete or a failure to stop."""

    campaigns: Campaigns

    def wanting_workers(self, now: float) -> set[str]:
        """The campaigns that hold or will soon want a worker: a refit queued or running, or a
        ticket out (its label brings a refit). One pipelined read per campaign: the chains'
        fan-out asks it only when a worker is idle."""
        ids = self.campaigns.ids()
        pipe = self.r.pipeline(transaction=False)
        for campaign_id in ids:
            pipe.hget(self.k(campaign_id, "state"), "refit")
            pipe.zcount(self.k(campaign_id, "leases"), now, "+inf")
        answers = pipe.execute()
        return {
            campaign_id
            for campaign_id, refit, out in zip(ids, answers[::2], answers[1::2], strict=True)
            if refit in (b"queued", b"running") or out
        }

    def workforce(self, now: float) -> Workforce:
        """The workers, their states and the jobs waiting (:func:`service.queues.load`), and,
        only when more workers idle than jobs wait, the campaigns that want a worker."""
        workers, waiting = queues.load(self.r)
        hands = tuple(Hand(w.name, frozenset(w.queue_names()), w.get_state()) for w in workers)
        idle = sum(1 for hand in hands if hand.state == "idle")
        wanting = frozenset(self.wanting_workers(now)) if idle > waiting else None
        return Workforce(hands, waiting, wanting)

    def track(self, campaign_id: str, members: list[str], now: float, until: float) -> bool:
        """Note jobs (``refit:<id>``, ``short:<id>``) among the campaign's, for a delete or a
        failure to stop, until ``until``; False if the campaign is gone (noted nowhere)."""
        keys = [self.k(campaign_id, "spec"), self.k(campaign_id, "jobs")]
        return bool(self.s.track(keys=keys, args=[now, until, *members]))

    def admit_short(
        self,
        campaign_id: str,
        member: str,
        now: float,
        until: float,
        most: int,
        most_of_stack: int | None = None,
    ) -> int:
        """Note model call ``member`` among the campaign's jobs and the stack's until ``until``
        unless ``most`` of the campaign's or ``most_of_stack`` of all campaigns' are out already
        (None: a call the stack's share does not count, a plot): 1 noted, 0 the campaign is
        gone, -1 too many of the campaign's out, -2 too many of the stack's."""
        keys = [self.k(campaign_id, "spec"), self.k(campaign_id, "jobs"), SHORTS]
        stack = "" if most_of_stack is None else most_of_stack
        return int(self.s.admit_short(keys=keys, args=[now, until, member, most, stack]))

    def forget(self, campaign_id: str, members: list[str]) -> None:
        """Jobs that ended, no longer the campaign's (nor, for model calls, the stack's) to stop
        or count."""
        pipe = self.r.pipeline(transaction=False)
        pipe.zrem(self.k(campaign_id, "jobs"), *members)
        pipe.zrem(SHORTS, *members)
        pipe.execute()

    def stop_refits(self, campaign_id: str, but: str | None = None) -> None:
        """Stop the campaign's refit jobs (refits, chain groups, merges) but ``but``: those
        running are killed, those queued canceled."""
        members = self.r.zrange(self.k(campaign_id, "jobs"), 0, -1)
        ids = [m.decode().partition(":")[2] for m in members if m.startswith(b"refit:")]
        queues.stop_jobs(self.r, [i for i in ids if i != but])
