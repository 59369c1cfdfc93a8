"""Models and the stopping rule in the store (:mod:`service.store.models`), on a store no worker
serves: a refit's model is stored only while that refit is in charge and newer than the one there;
a model that meets the campaign's stopping rule stops it in the same step, and only a stopped
campaign resumes; an evaluation keeps its metrics in the history."""

import time

import pytest

from fbgp_al.service import keys
from fbgp_al.service.refusals import NotFound
from fbgp_al.service.schemas.campaigns import CampaignCreate


def _campaign(store, make_body, **changes) -> str:
    campaign = store.campaigns.create(CampaignCreate(**make_body(**changes)).model_dump())["id"]
    store.r.hset(
        keys.campaign(campaign, "state"), mapping={"refit": "running", "refit_job": "job-1"}
    )
    return campaign


def _model(version: int, **accuracy) -> dict:
    return {"version": version, "diagnostics": {"refit_seconds": 1.5}, "accuracy": accuracy}


def test_a_model_is_stored_only_by_the_refit_in_charge_and_never_over_a_newer_one(
    bare_store, make_body
):
    store = bare_store
    campaign = _campaign(store, make_body)
    with pytest.raises(NotFound, match="no model yet"):
        store.models.latest(campaign)
    assert not store.models.save(campaign, _model(3), [{"index": 1}], "another-job")
    assert store.models.save(campaign, _model(4), [{"index": 7}, {"index": 2}], "job-1")
    assert store.models.latest(campaign)["version"] == 4 and store.models.ranking(campaign)[0] == {
        "index": 7
    }
    assert not store.models.save(campaign, _model(3), [], "job-1")  # older than the one there
    assert store.models.latest(campaign)["version"] == 4
    (event,) = store.history.read(campaign)
    assert (event["event"], event["version"], event["refit_seconds"]) == ("model", 4, 1.5)
    assert store.campaigns.state(campaign)["model_version"] == "4"
    # an evaluation keeps the metrics of its kind, nothing else
    store.models.record_evaluation(
        campaign, 4, {"nlml": 1.0, "rmse": 2.0, "nlpd_mixture": 3.0, "x": 9}
    )
    last = store.history.read(campaign)[-1]
    assert last["event"] == "evaluate" and last["version"] == 4
    assert {k: last[k] for k in ("nlml", "rmse", "nlpd_mixture")} == {
        "nlml": 1.0,
        "rmse": 2.0,
        "nlpd_mixture": 3.0,
    } and "x" not in last
    assert not store.models.resume(campaign)  # it was not stopped
    with pytest.raises(NotFound):
        store.models.latest("no-such-campaign")


def test_a_model_that_meets_the_rule_stops_the_campaign_and_the_owner_resumes_it(
    bare_store, make_body
):
    store = bare_store
    rule = {"ipv": 1.0, "min_labels": 3, "patience": 1}
    campaign = _campaign(store, make_body, stop=rule)
    assert store.models.save(campaign, _model(3, ipv=2.0), [], "job-1")
    assert "stopped" not in store.campaigns.state(campaign)  # not met
    assert store.models.save(campaign, _model(4, ipv=0.5), [], "job-1")
    stopped = [e for e in store.history.read(campaign) if e["event"] == "stopped"]
    assert [(e["rule"], e["value"], e["version"]) for e in stopped] == [("ipv", 0.5, 4)]
    assert store.campaigns.state(campaign).get("stopped")
    assert store.models.resume(campaign, stop=None, replace=True)
    assert (
        not store.campaigns.state(campaign).get("stopped")
        and store.campaigns.spec(campaign)["stop"] is None
    )
    assert store.history.read(campaign)[-1]["event"] == "resumed"
    assert not store.models.resume(campaign)  # going on again: nothing to resume
    assert time.time() - store.history.read(campaign)[-1]["at"] < 60
