"""The pages' pictures, kept per campaign and drawn once per change of what they show."""

from __future__ import annotations

import logging

log = logging.getLogger("fbgp.store")


class Plots:
    """The pages' pictures, kept per campaign
    (a part of :class:`service.store.CampaignStore`)."""

    @staticmethod
    def stamp(model_version: int | None, n_labeled: int, n_history: int) -> str:
        """What a campaign's pictures are drawn from, as one word: its model, its labels and its
        history's events (a model's accuracy, an evaluation, a failed run)."""
        return f"{model_version}-{n_labeled}-{n_history}"

    def plot_stamp(self, campaign_id: str) -> tuple[int | None, str]:
        """The campaign's model version and :meth:`stamp` now."""
        pipe = self.r.pipeline(transaction=True)
        pipe.hget(self.k(campaign_id, "state"), "model_version")
        pipe.llen(self.k(campaign_id, "labels"))
        pipe.llen(self.k(campaign_id, "history"))
        version, n, events = pipe.execute()
        version = int(version) if version else None
        return version, self.stamp(version, int(n), int(events))

    def cached_plot(self, campaign_id: str, name: str, stamp: str) -> bytes | None:
        """The picture ``name`` drawn at ``stamp``, if it is kept."""
        kept = self.r.hget(self.k(campaign_id, "plots"), name)
        if kept is None:
            return None
        drawn, _, png = kept.partition(b"\n")
        return png if drawn.decode() == stamp else None

    def keep_plot(self, campaign_id: str, name: str, stamp: str, png: bytes) -> None:
        """Keep the picture ``name`` drawn at ``stamp`` (in place of an older one), unless the
        campaign was deleted meanwhile."""
        keys = [self.k(campaign_id, "spec"), self.k(campaign_id, "plots")]
        self.s.write_if_campaign(keys=keys, args=["HSET", name, stamp.encode() + b"\n" + png])
