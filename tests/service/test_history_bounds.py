"""A campaign's events are kept to their latest, against the real Redis and a real worker: its
evaluations (``keep_evaluations``) apart from its models, so that evaluations never push out
what the stopping rule reads; its history's events (``keep_history``), the stopping rule still
right on what is kept; the pictures still drawn again at every new event."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest
from fastapi.testclient import TestClient
from redis import Redis
from rq import Worker

from fbgp_al.service import keys
from fbgp_al.service.app import app
from fbgp_al.service.settings import Settings, get_settings
from fbgp_al.service.store import CampaignStore
from tests.conftest import start_redis, start_worker, stop
from tests.service.conftest import label_design, wait_for_model

KEEP_EVALUATIONS = 3
KEEP_HISTORY = 10


@pytest.fixture
def keep_few(monkeypatch):
    """This process's settings with few events kept."""
    monkeypatch.setenv("FBGP_KEEP_EVALUATIONS", str(KEEP_EVALUATIONS))
    monkeypatch.setenv("FBGP_KEEP_HISTORY", str(KEEP_HISTORY))
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


@pytest.fixture
def few_client(tmp_path, keep_few):
    """The API in process against a Redis and a worker of their own, both keeping few events
    (the worker stores each evaluation)."""
    redis_process, url = start_redis(tmp_path)
    worker = start_worker(
        url, tmp_path / "worker.log", keep_evaluations=KEEP_EVALUATIONS, keep_history=KEEP_HISTORY
    )
    try:
        deadline = time.monotonic() + 120
        while not Worker.all(connection=Redis.from_url(url)):
            assert worker.poll() is None and time.monotonic() < deadline, "no worker"
            time.sleep(0.1)
        settings = Settings(redis_url=url, job_wait_seconds=60)
        app.dependency_overrides[get_settings] = lambda: settings
        with TestClient(app) as client:
            yield client, Redis.from_url(url)
    finally:
        app.dependency_overrides.clear()
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
        stop(redis_process)


def test_evaluations_are_kept_to_the_latest_apart_from_the_models(few_client, make_body):
    """Before, every /evaluate added an event to the history for ever (217 bytes each)."""
    client, redis = few_client
    campaign = client.post("/campaigns", json=make_body(max_labels=4)).json()["id"]
    url = f"/campaigns/{campaign}"
    label_design(client, campaign, [0.3, 0.9, -0.2])
    wait_for_model(client, campaign, 3)
    store = CampaignStore(redis)
    stamps, rmse = [], []
    for i in range(2 * KEEP_EVALUATIONS):
        r = client.post(f"{url}/evaluate", json={"x": [[0.6 + 0.1 * i]], "y": [0.1 * i]})
        assert r.status_code == 200, r.text
        rmse.append(r.json()["rmse"])
        stamps.append(store.plots.stamp(campaign)[1])
    assert len(set(stamps)) == len(stamps), stamps  # every evaluation draws the curve again
    events = client.get(f"{url}/history").json()
    evaluations = [e for e in events if e["event"] == "evaluate"]
    assert [e["rmse"] for e in evaluations] == pytest.approx(rmse[-KEEP_EVALUATIONS:]), events
    assert [e["event"] for e in events].count("model") == 1  # the model stays
    assert redis.llen(f"fbgp:c:{campaign}:evaluations") == KEEP_EVALUATIONS
    page = client.get(f"{url}/view")
    assert page.status_code == 200 and "plot-curve" in page.text
    assert client.get(f"{url}/plots/curve.png").status_code == 200


def _model(version: int, ipv_relative: float) -> dict:
    diagnostics = {"refit_seconds": 0.1, "max_rhat": 1.0, "min_ess_bulk": 100.0, "divergences": 0}
    return {
        "version": version,
        "diagnostics": diagnostics,
        "accuracy": {"ipv_relative": ipv_relative},
    }


def test_the_history_is_kept_to_its_latest_and_the_stopping_rule_reads_what_is_kept(
    settings, keep_few
):
    """A refit runs again after every failed or abandoned run, so churn adds models without end:
    the history keeps the latest KEEP_HISTORY events. The rule (patience 3) still stops on the
    third model in a row that meets its target, and a resume pushed out of the history by newer
    models still counts: no model from before it is among those kept."""
    redis = Redis.from_url(settings.redis_url.rsplit("/", 1)[0] + "/14")  # no worker serves it
    redis.flushdb()
    store = CampaignStore(redis)
    body = {
        "name": "kept",
        "inputs": [{"name": "x", "lower": 0, "upper": 1}],
        "pool": {"type": "grid", "points_per_dim": 11},
        "initial_design": {"size": 1},
        "seed": 0,
        "allow_repeats": False,
        "max_labels": 100,
        "stop": {"ipv_relative": 0.5, "min_labels": 1, "patience": 3},
    }
    campaign = store.campaigns.create(body)["id"]
    history = keys.campaign(campaign, "history")
    version = 0

    def models(*values: float) -> None:
        nonlocal version
        for value in values:
            version += 1
            store.r.hset(keys.campaign(campaign, "state"), "refit_job", "token")
            assert store.models.save(campaign, _model(version, value), [], "token")

    models(*[1.0] * 25)  # churn: none meets the target
    assert redis.llen(history) == KEEP_HISTORY
    models(0.1, 0.1)
    assert not store.campaigns.state(campaign).get("stopped")
    models(0.1)
    stopped = json.loads(store.campaigns.state(campaign)["stopped"])
    assert stopped["version"] == version == 28
    assert store.models.resume(campaign)
    models(0.1, 0.1)  # two after the resume: not yet patience
    assert not store.campaigns.state(campaign).get("stopped")
    models(*[1.0] * KEEP_HISTORY, 0.1, 0.1)  # the resume and the stop pushed out of the history
    assert [e["event"] for e in store.history.read(campaign)] == ["model"] * KEEP_HISTORY
    assert not store.campaigns.state(campaign).get("stopped")
    models(0.1)
    assert json.loads(store.campaigns.state(campaign)["stopped"])["version"] == version
    assert redis.llen(history) == KEEP_HISTORY
    redis.flushdb()
