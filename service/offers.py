"""``/next``'s story, read top to bottom (:func:`offer`): under the campaign's lock, a snapshot
of it; a refit revived if the campaign waits for one whose worker died; the loop's rules
(:mod:`service.loop`) decide what to answer; the points they chose issued as tickets. The
router (:mod:`service.routes.labeling`) parses the request, waits for an answer
(:mod:`service.wakeups`) and maps it to HTTP."""

from __future__ import annotations

import logging

from redis.exceptions import LockError

from fbgp_al.service import loop
from fbgp_al.service.refusals import Busy
from fbgp_al.service.settings import Settings
from fbgp_al.service.store import CampaignStore

log = logging.getLogger("fbgp.api")


def offer(
    store: CampaignStore, campaign_id: str, now: float, settings: Settings, count: int = 1
) -> list[loop.Ticket] | loop.Answer:
    """One look at the campaign, under its lock: up to ``count`` tickets (for as many polls),
    or the answer the rules gave instead of even one (:class:`~service.loop.Wait`,
    :class:`~service.loop.Done`, :class:`~service.loop.Stalled`, :class:`~service.loop.Failed`,
    :class:`~service.loop.Failing`). A campaign that waits for a model also has its refit
    revived if that died. 503 (:class:`Busy`) when the campaign's
    lock is not acquired in ``lock_timeout_seconds``."""
    lock = store.campaigns.lock(campaign_id, settings.lock_timeout_seconds)
    if not lock.acquire():
        raise Busy(
            f"the campaign's lock was not acquired within {settings.lock_timeout_seconds:g} "
            "s (another request is choosing its points); try again",
            settings.store_retry_after_seconds,
        )
    try:
        return _offer_locked(store, campaign_id, now, settings, count)
    finally:
        try:
            lock.release()
        except LockError as error:  # held past lock_timeout_seconds: it had expired already
            log.warning(
                "the campaign's lock expired before its release (%s)",
                error,
                extra={"campaign": campaign_id},
            )


def _offer_locked(
    store: CampaignStore, campaign_id: str, now: float, settings: Settings, count: int
) -> list[loop.Ticket] | loop.Answer:
    spec = store.campaigns.spec(campaign_id)
    rules = loop.Rules.of(spec)
    snap = store.tickets.snapshot(campaign_id, now)
    if loop.awaits_refit(rules, snap):  # a refit whose worker died must not stall it
        store.revivals.revive(campaign_id, now, settings.refit_lease_seconds)
    answers = loop.next_answers(rules, snap, count)
    if not isinstance(answers, list):
        return answers
    indices = [a.index for a in answers if not isinstance(a.index, str)]
    points = iter(store.campaigns.pool_points(campaign_id, spec, indices))
    # a point off the pool (a key, worker.fitting.search) as its model's ranking holds it
    offers = [
        (a.index, snap.off_pool[a.index] if isinstance(a.index, str) else next(points), a.version)
        for a in answers
    ]
    levels = bool(spec.get("fidelities"))
    return store.tickets.issue(campaign_id, offers, spec["lease_seconds"], now, levels)
