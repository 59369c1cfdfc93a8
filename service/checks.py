"""What a request's values must fit, checked by the routes and the stories: its points the
campaign's inputs, its outputs and noise variances the campaign's outputs and noise model
(:mod:`worker.vocabulary.values`); refused as :class:`service.refusals.Unprocessable`
otherwise."""

from __future__ import annotations

from fbgp_al.service.refusals import unprocessable_values
from fbgp_al.service.schemas.inputs import check_points
from fbgp_al.service.store import CampaignStore


def spec_with_points(store: CampaignStore, campaign_id: str, x: list) -> tuple[dict, list]:
    """The campaign's spec and ``x`` with each value as its input keeps it, once ``x`` is known
    to fit its inputs (422 otherwise)."""
    spec = store.campaigns.spec(campaign_id)
    with unprocessable_values():
        return spec, check_points(x, spec["inputs"])
