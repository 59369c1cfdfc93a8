"""The pages' pictures in the store (:mod:`service.store.plots`), on a store no worker serves: a
picture is kept under the stamp of what it shows (the model, the labels, the history) and read
back only under that stamp; a deleted campaign keeps none."""

import time

from fbgp_al.service import keys
from fbgp_al.service.schemas.campaigns import CampaignCreate


def test_a_picture_is_kept_for_its_stamp_and_a_change_of_the_campaign_stales_it(
    bare_store, make_body
):
    store = bare_store
    campaign = store.campaigns.create(CampaignCreate(**make_body()).model_dump())["id"]
    version, stamp = store.plots.stamp(campaign)
    assert version is None and stamp.startswith("None-0-0.0-")  # no model, label or event
    assert store.plots.cached(campaign, "posterior", stamp) is None
    store.plots.keep(campaign, "posterior", stamp, b"\x89PNG first")
    assert store.plots.cached(campaign, "posterior", stamp) == b"\x89PNG first"
    assert store.plots.cached(campaign, "model", stamp) is None  # another picture
    # a label changes what the pictures show: a new stamp, and the kept picture is stale
    store.labels.import_observations(campaign, [[1.0]], [0.5], time.time())
    _, labeled = store.plots.stamp(campaign)
    assert labeled.startswith("None-1-0.0-") and labeled != stamp
    assert store.plots.cached(campaign, "posterior", labeled) is None
    store.plots.keep(campaign, "posterior", labeled, b"\x89PNG second")  # in place of the first
    assert store.plots.cached(campaign, "posterior", stamp) is None
    assert store.plots.cached(campaign, "posterior", labeled) == b"\x89PNG second"
    # once the campaign is deleted, a picture drawn meanwhile is not kept
    store.campaigns.delete(campaign)
    store.plots.keep(campaign, "posterior", labeled, b"\x89PNG late")
    assert not store.r.exists(keys.campaign(campaign, "plots"))
