"""The pages' pictures, kept per campaign and drawn once per change of what they show; and a
model's Sobol indices, kept for its version (:mod:`service.jobs.calls`)."""

from __future__ import annotations

import logging
import zlib

from fbgp_al.service.store.noun import Noun

log = logging.getLogger("fbgp.store")


class Plots(Noun):
    """The pages' pictures (and the indices the Sobol picture draws), kept per campaign."""

    def stamp(self, campaign_id: str) -> tuple[int | None, str]:
        """The campaign's model version, and what its pictures are drawn from as one word: its
        model, its labels and its events (a model's accuracy, an evaluation, a stop): their
        counts and a checksum of the latest of each kind, which changes with every event even
        once their lists are kept to their latest (``keep_event.lua``)."""
        pipe = self.r.pipeline(transaction=True)
        pipe.hget(self.k(campaign_id, "state"), "model_version")
        pipe.llen(self.k(campaign_id, "labels"))
        for part in ("history", "evaluations"):
            pipe.llen(self.k(campaign_id, part))
            pipe.lindex(self.k(campaign_id, part), -1)
        version, n, n_history, last_event, n_evaluations, last_evaluation = pipe.execute()
        version = int(version) if version else None
        latest = zlib.crc32((last_event or b"") + b"\n" + (last_evaluation or b""))
        return version, f"{version}-{n}-{n_history}.{n_evaluations}-{latest:08x}"

    def cached(self, campaign_id: str, name: str, stamp: str) -> bytes | None:
        """The picture ``name`` drawn at ``stamp``, if it is kept."""
        kept = self.r.hget(self.k(campaign_id, "plots"), name)
        if kept is None:
            return None
        drawn, _, png = kept.partition(b"\n")
        return png if drawn.decode() == stamp else None

    def keep(self, campaign_id: str, name: str, stamp: str, png: bytes) -> None:
        """Keep the picture ``name`` drawn at ``stamp`` (in place of an older one), unless the
        campaign was deleted meanwhile."""
        keys = [self.k(campaign_id, "spec"), self.k(campaign_id, "plots")]
        self.s.write_if_campaign(keys=keys, args=["HSET", name, stamp.encode() + b"\n" + png])
