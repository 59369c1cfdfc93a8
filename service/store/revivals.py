"""Refits revived (a part of :class:`service.store.CampaignStore`, beside
:class:`~service.store.refits.Refits`): as :func:`service.supervision.refit_condition` finds a
campaign's refit, a failed one whose back-off ran out is queued again, one whose enqueue never
came is enqueued, and a dead one is queued again under a new job, its death counted as a
failure."""

from __future__ import annotations

import contextlib
import json
import logging
import uuid

from fbgp_al.service import queues, supervision
from fbgp_al.service.loop import Refit
from fbgp_al.service.refusals import NotFound
from fbgp_al.service.store.campaigns import Campaigns
from fbgp_al.service.store.noun import Noun
from fbgp_al.service.store.pollers import Pollers
from fbgp_al.service.store.refits import DIED, Refits
from fbgp_al.service.store.tickets import Tickets

log = logging.getLogger("fbgp.store")


class Revivals(Noun):
    """A campaign's refit revived where it died, was never enqueued, or is due again."""

    campaigns: Campaigns
    tickets: Tickets
    refits: Refits
    pollers: Pollers

    def revive(self, campaign_id: str, now: float, lease: float) -> bool:
        """Act on :func:`service.supervision.refit_condition`: a failed refit whose back-off ran
        out is queued again; a queued one whose enqueue never came (the API or worker that queued it
        stopped in between) is enqueued, and counts as nothing; a dead one is queued again
        under a new job (the old one, should it still run somewhere, is no longer in charge and
        cannot write), and its death counts as a failure of the refit: from the second in a row
        on it backs off, and at ``refit_max_attempts`` in a row the campaign fails. True if this
        call acted (one caller wins when several look at once)."""
        refit = Refit.of(self.campaigns.state(campaign_id))
        condition = supervision.refit_condition(
            refit, now, lease, lambda: queues.job_facts(self.r, refit.job, refit.merge)
        )
        if condition == supervision.RefitCondition.RETRY_DUE:
            job_id = uuid.uuid4().hex
            if not self.s.retry_due(keys=[self.k(campaign_id, "state")], args=[job_id, now]):
                return False
            self.refits.after_failure(campaign_id, 1, job_id, now)
            return True
        if condition == supervision.RefitCondition.UNENQUEUED:
            return self.adopt(campaign_id, refit.job, now)
        if condition != supervision.RefitCondition.DEAD:
            return False
        job_id = uuid.uuid4().hex
        failure = self.refits.failure_args(campaign_id, job_id, now, DIED, died=True)
        if failure is None:
            return False  # deleted meanwhile
        keys, params = failure
        event = {
            "event": "refit_failed",
            "n_labeled": self.campaigns.n_labeled(campaign_id),
            "at": now,
            "error": DIED,
        }
        outcome = self.s.revive(keys=keys, args=[refit.job, params, json.dumps(event)])
        if not outcome:
            return False
        self.refits.after_failure(campaign_id, outcome, job_id, now)
        return True

    def revive_all(self, now: float, lease: float) -> list[str]:
        """:meth:`revive` for every campaign (and its expired tickets pruned): the ids
        revived."""
        revived = []
        for campaign_id in self.campaigns.ids():
            with contextlib.suppress(NotFound):
                self.tickets.expire(campaign_id, now)
                if self.revive(campaign_id, now, lease):
                    revived.append(campaign_id)
        return revived

    def adopt(self, campaign_id: str, old: str, now: float) -> bool:
        """Enqueue a queued refit whose job ``old`` ('' for none) never reached RQ under a new
        job (a new id, so that a late push of the old one cannot run a job twice)."""
        job_id = uuid.uuid4().hex
        if not self.s.adopt(keys=[self.k(campaign_id, "state")], args=[job_id, now, old]):
            return False
        log.warning(
            "a queued refit's job never reached RQ (whoever was to enqueue it stopped "
            "first): enqueued now",
            extra={"campaign": campaign_id},
        )
        self.refits.enqueue_as(campaign_id, job_id, now)
        self.pollers.wake(campaign_id)
        return True
