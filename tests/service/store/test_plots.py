"""The pages' pictures in the store (:mod:`service.store.plots`), on a store no worker serves: a
picture is kept under the stamp of what it shows (the model, the labels, the history) and read
back only under that stamp; a deleted campaign keeps none."""

import time

from fbgp_al.service.schemas.campaigns import CampaignCreate


def test_a_picture_is_kept_for_its_stamp_and_a_change_of_the_campaign_stales_it(
    bare_store, make_body
):
    store = bare_store
    campaign = store.create(CampaignCreate(**make_body()).model_dump())["id"]
    version, stamp = store.plot_stamp(campaign)
    assert version is None and stamp.startswith("None-0-0.0-")  # no model, label or event
    assert store.cached_plot(campaign, "posterior", stamp) is None
    store.keep_plot(campaign, "posterior", stamp, b"\x89PNG first")
    assert store.cached_plot(campaign, "posterior", stamp) == b"\x89PNG first"
    assert store.cached_plot(campaign, "model", stamp) is None  # another picture
    # a label changes what the pictures show: a new stamp, and the kept picture is stale
    store.import_observations(campaign, [[1.0]], [0.5], time.time(), enqueue=False)
    _, labeled = store.plot_stamp(campaign)
    assert labeled.startswith("None-1-0.0-") and labeled != stamp
    assert store.cached_plot(campaign, "posterior", labeled) is None
    store.keep_plot(campaign, "posterior", labeled, b"\x89PNG second")  # in place of the first
    assert store.cached_plot(campaign, "posterior", stamp) is None
    assert store.cached_plot(campaign, "posterior", labeled) == b"\x89PNG second"
    # once the campaign is deleted, a picture drawn meanwhile is not kept
    store.delete(campaign)
    store.keep_plot(campaign, "posterior", labeled, b"\x89PNG late")
    assert not store.r.exists(store.k(campaign, "plots"))
