"""Stopping rules (:mod:`service.stopping`) against the real stack: a campaign whose rule is met
after a refit is done, with the rule in its status and history, /next answers 410, tickets
handed out before still take their labels, imports are still taken; its owner can resume it
(also through the SDK). A rule not met changes nothing. The rule itself (patience, min_labels,
resumes) on histories, without Redis."""

from __future__ import annotations

import time

import httpx
import pytest
from redis import Redis

from fbgp_al.service import stopping
from fbgp_al.service.keys import PHASES
from fbgp_al.service.store import CampaignStore
from fbgp_al.worker.vocabulary.defaults import STOP_TARGETS
from tests.service.conftest import label_design

YS = [0.3, 0.9, -0.2]


def _ticket(client, campaign):
    r = client.get(f"/campaigns/{campaign}/next")
    assert r.status_code == 200, r.text
    return r.json()["ticket"]


def _label(client, campaign, ticket, y):
    r = client.post(f"/campaigns/{campaign}/label", json={"ticket": ticket, "y": y})
    assert r.status_code == 201, r.text
    return r.json()


def _refitted(client, campaign, version: int, seconds: float = 60) -> dict:
    """The status once model ``version`` is stored and its refit has ended (so that the rule was
    looked at: the stop comes after the model)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status = client.get(f"/campaigns/{campaign}").json()
        if status["model_version"] == version and status["refit"] == "idle":
            return status
        time.sleep(0.05)
    raise AssertionError(f"no model {version} with its refit ended: {status}")


def _phases(settings) -> dict:
    return CampaignStore(Redis.from_url(settings.redis_url)).campaigns.count_by_phase()


def test_a_met_rule_stops_the_campaign_and_no_label_is_lost(client, make_body, settings):
    # a generous target (the mixture's predictive variance is about the labels' variance at
    # most): met by every model, so the rule stops at the second with at least 4 labels
    stop = {"ipv_relative": 10.0, "min_labels": 4, "patience": 2}
    body = make_body(mode="parallel", max_pending=2, max_labels=12, stop=stop)
    campaign = client.post("/campaigns", json=body).json()["id"]
    label_design(client, campaign, YS)
    _refitted(client, campaign, 3)
    early, kept = _ticket(client, campaign), _ticket(client, campaign)  # 2 out
    _label(client, campaign, early, 0.5)
    status = _refitted(client, campaign, 4)
    assert status["state"] == "active" and status["stopped_by"] is None  # one model of two
    _label(client, campaign, _ticket(client, campaign), 0.1)
    status = _refitted(client, campaign, 5)
    assert status["state"] == "done", status
    stopped = status["stopped_by"]
    assert stopped["rule"] == "ipv_relative" and stopped["version"] == 5
    assert stopped["target"] == 10.0 and 0 < stopped["value"] <= 10.0
    model = client.get(f"/campaigns/{campaign}/model").json()
    assert model["accuracy"]["ipv_relative"] == stopped["value"]
    r = client.get(f"/campaigns/{campaign}/next")
    assert r.status_code == 410 and "stopping rule" in r.json()["detail"]
    assert _phases(settings)["done"] == 1
    # the ticket handed out before the stop is still labeled, and an import still taken
    assert _label(client, campaign, kept, 0.7)["n_labeled"] == 6
    r = client.post(f"/campaigns/{campaign}/observations", json={"x": [[1.234]], "y": [0.2]})
    assert r.status_code == 201, r.text
    status = _refitted(client, campaign, 7)  # refits go on over every label
    assert status["state"] == "done" and status["stopped_by"]["version"] == 5
    assert client.get(f"/campaigns/{campaign}/next").status_code == 410
    assert client.get(f"/campaigns/{campaign}/observations").json()["y"][-2:] == [0.7, 0.2]
    view = client.get(f"/campaigns/{campaign}/view").text
    assert "id='stopped'" in view and "ipv_relative" in view and "plot-accuracy" in view
    png = client.get(f"/campaigns/{campaign}/plots/accuracy.png")
    assert png.status_code == 200 and png.content.startswith(b"\x89PNG")
    history = client.get(f"/campaigns/{campaign}/history").json()
    assert [e["version"] for e in history if e["event"] == "stopped"] == [5]
    models = [e for e in history if e["event"] == "model"]
    assert all(set(STOP_TARGETS) <= set(e["accuracy"]) for e in models)
    # the owner resumes it: points again; the patience counts from the next model
    assert client.post(f"/campaigns/{campaign}/retry").status_code == 409
    r = client.post(f"/campaigns/{campaign}/resume")
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "active" and r.json()["stopped_by"] is None
    assert _phases(settings) == {
        "design": 0,
        "active": 1,
        "done": 0,
        "failed": 0,
        "failing": 0,
        "stalled": 0,
    }
    assert client.post(f"/campaigns/{campaign}/resume").status_code == 409  # not stopped
    _label(client, campaign, _ticket(client, campaign), 0.4)
    status = _refitted(client, campaign, 8)
    assert status["state"] == "active"  # one model since the resume
    _label(client, campaign, _ticket(client, campaign), 0.6)
    status = _refitted(client, campaign, 9)
    assert status["state"] == "done" and status["stopped_by"]["version"] == 9
    # resumed without a rule, it goes on
    r = client.post(f"/campaigns/{campaign}/resume", json={"stop": None})
    assert r.status_code == 200 and r.json()["state"] == "active"
    _label(client, campaign, _ticket(client, campaign), 0.0)
    _label(client, campaign, _ticket(client, campaign), 0.8)
    status = _refitted(client, campaign, 11)
    assert status["state"] == "active" and status["stopped_by"] is None
    assert client.get(f"/campaigns/{campaign}/next").status_code == 200
    # the count by phase kept by the scripts agrees with one counted afresh
    redis = Redis.from_url(settings.redis_url)
    kept_count = _phases(settings)
    redis.delete(PHASES)
    assert _phases(settings) == kept_count


def test_a_poll_waiting_for_the_model_that_meets_the_rule_gets_410(client, make_body):
    """The model and the stop are stored at once: a long poll woken by that model finds the
    campaign done, and no simulation starts on a point the stopped campaign does not want."""
    stop = {"ipv_relative": 10.0, "min_labels": 3, "patience": 1}
    for seed in range(3):
        campaign = client.post("/campaigns", json=make_body(stop=stop, seed=seed)).json()["id"]
        label_design(client, campaign, YS)
        r = client.get(f"/campaigns/{campaign}/next", params={"wait": 30})  # waits for model 3
        assert r.status_code == 410, r.text
        assert client.get(f"/campaigns/{campaign}").json()["n_pending"] == 0


def test_a_rule_not_met_changes_nothing(client, make_body):
    stop = {"loo_rmse": 1e-12, "qbc": 1e-12, "min_labels": 3, "patience": 1}
    campaign = client.post("/campaigns", json=make_body(stop=stop)).json()["id"]
    label_design(client, campaign, YS)
    _refitted(client, campaign, 3)
    _label(client, campaign, _ticket(client, campaign), 0.5)
    status = _refitted(client, campaign, 4)
    assert status["state"] == "active" and status["stopped_by"] is None
    accuracy = client.get(f"/campaigns/{campaign}/model").json()["accuracy"]
    assert accuracy["loo_rmse"] > 1e-12 and accuracy["qbc"] > 1e-12
    assert client.get(f"/campaigns/{campaign}/next").status_code == 200
    assert client.post(f"/campaigns/{campaign}/resume").status_code == 409
    assert "id='stopped'" not in client.get(f"/campaigns/{campaign}/view").text


def _model_event(version, **accuracy):
    return {"event": "model", "version": version, "accuracy": accuracy}


def test_the_rule_needs_patience_consecutive_models_of_min_labels():
    rule = {"loo_rmse": 0.1, "qbc": 0.5, "min_labels": 4, "patience": 2}
    good, bad = {"loo_rmse": 0.05, "qbc": 1.0}, {"loo_rmse": 0.2, "qbc": 1.0}
    verdict = stopping.stop_verdict
    history = [_model_event(3, **good), _model_event(4, **good)]
    assert verdict(rule, history, 3, STOP_TARGETS) is None  # model 3 has too few labels
    history.append({"event": "run_failed"})
    history.append(_model_event(5, **good))
    assert verdict(rule, history, 3, STOP_TARGETS) == {
        "rule": "loo_rmse",
        "value": 0.05,
        "target": 0.1,
        "version": 5,
    }
    assert verdict(rule, history[:-1] + [_model_event(5, **bad)], 3, STOP_TARGETS) is None
    # the first target of the list that is met names the verdict; at the target is met
    both = [_model_event(5, loo_rmse=0.1, qbc=0.5), _model_event(6, loo_rmse=0.01, qbc=0.1)]
    assert verdict(rule, both, 3, STOP_TARGETS)["rule"] == "loo_rmse"
    # patience counts from the last resume
    resumed = [*history, {"event": "resumed"}, _model_event(6, **good)]
    assert verdict(rule, resumed, 3, STOP_TARGETS) is None
    assert verdict(rule, [*resumed, _model_event(7, **good)], 3, STOP_TARGETS)["version"] == 7
    # default min_labels: the design's size + 1; no rule, no verdict
    assert verdict({"qbc": 2.0, "patience": 1}, [_model_event(3, **good)], 3, STOP_TARGETS) is None
    assert verdict({"qbc": 2.0, "patience": 1}, [_model_event(4, **good)], 3, STOP_TARGETS)
    assert verdict(None, history, 3, STOP_TARGETS) is None
    assert (
        verdict({"qbc": 2.0, "patience": 1}, [{"event": "model", "version": 9}], 3, STOP_TARGETS)
        is None
    )  # a model stored before accuracy existed


def test_the_sdk_sees_the_stop_and_resumes(api_url, make_body):
    """A rule met by the first model (patience 1 from the design's size): the SDK's /next says
    done, its status and model carry the stop and the estimates, and it resumes the campaign
    under a new rule that is not met."""
    from fbgp_al.clients.client import ApiError, FbgpClient

    stop = {"qbc_relative": 100.0, "min_labels": 3, "patience": 1}
    with FbgpClient(api_url) as api:
        campaign = api.create_campaign(make_body(stop=stop)).id
        with pytest.raises(ApiError) as error:
            api.resume(campaign)
        assert error.value.status_code == 409
        for y in YS:
            api.label(campaign, api.next_point(campaign, wait=10).ticket, y)
        api.wait_for_model(campaign, 3, timeout=60)
        status = api.campaign(campaign)
        while status.refit != "idle":  # the stop comes after the model
            time.sleep(0.05)
            status = api.campaign(campaign)
        assert status.state == "done" and status.stopped_by["rule"] == "qbc_relative"
        assert api.try_next(campaign) is None
        assert api.model(campaign).accuracy["qbc_relative"] == status.stopped_by["value"]
        status = api.resume(campaign, stop={"loo_rmse": 1e-12, "patience": 1})
        assert status.state == "active" and status.stopped_by is None
        api.label(campaign, api.next_point(campaign, wait=10).ticket, 0.4)
        api.wait_for_model(campaign, 4, timeout=60)
        history = httpx.get(f"{api_url}/campaigns/{campaign}/history").json()
        resumed = [e for e in history if e["event"] == "resumed"]
        assert resumed[0]["stop"]["loo_rmse"] == 1e-12 and resumed[0]["n_labeled"] == 3
        while (status := api.campaign(campaign)).refit != "idle":
            time.sleep(0.05)
        assert status.state == "active" and status.model_version == 4
