"""The campaigns counted by state, for ``/metrics`` and the campaigns list: by phase as the
scripts keep count (:meth:`service.store.campaigns.Campaigns.count_by_phase`), with those
``failing`` or ``stalled`` counted under those states."""

from __future__ import annotations

import contextlib

from fbgp_al.service import loop
from fbgp_al.service.loop import Rules
from fbgp_al.service.refusals import NotFound
from fbgp_al.service.store.campaigns import Campaigns
from fbgp_al.service.store.noun import Noun
from fbgp_al.service.store.tickets import Tickets


class Census(Noun):
    """The campaigns counted by state; reads the campaigns and their tickets."""

    campaigns: Campaigns
    tickets: Tickets

    def count_by_state(self, now: float) -> dict[str, int]:
        """The campaigns by phase (:meth:`service.store.campaigns.Campaigns.count_by_phase`),
        with those in design or active that are ``failing`` or ``stalled``
        (:func:`service.loop.state`) counted under those states instead. Only a campaign with a
        failed run can be either, so every campaign's count of failed runs is read in one
        pipelined round trip, and only those with one are read further."""
        counts = self.campaigns.count_by_phase()
        ids = self.campaigns.ids()
        pipe = self.r.pipeline(transaction=False)
        for campaign_id in ids:
            pipe.hget(self.k(campaign_id, "state"), "n_failed")
        for campaign_id, failed in zip(ids, pipe.execute(), strict=True):
            if not failed or int(failed) == 0:
                continue
            with contextlib.suppress(NotFound):  # deleted meanwhile
                rules = Rules.of(self.campaigns.spec(campaign_id))
                refit = loop.Refit.of(self.campaigns.state(campaign_id))
                phase = loop.phase(
                    rules,
                    self.campaigns.n_labeled(campaign_id),
                    bool(refit.failed),
                    bool(refit.stopped),
                )
                failing = loop.failing(rules, refit.n_failed, refit.n_forgiven)
                stalled = not failing and loop.stalled(
                    rules, self.tickets.snapshot(campaign_id, now, False)
                )
                state = loop.state(phase, failing, stalled)
                if state != phase:
                    counts[str(phase)] -= 1
                    counts[str(state)] += 1
        return counts
