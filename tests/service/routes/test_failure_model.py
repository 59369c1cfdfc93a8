"""The failure model over HTTP (issue 38), against a real Redis and worker: a campaign whose
simulator fails in part of its box learns where and stops sending runs there; the model, the
export, ``/predict`` and the SDK's ``Metamodel`` give ``p_success``; the states ``failing`` and
``stalled`` in the status and the list; a retry keeps the failure model's evidence unless told
the simulator changed; the bracket checked and carried; ``"none"``; a campaign stored before
the option still loads and runs."""

import json
import math
import time

import httpx
import numpy as np
from redis import Redis

from fbgp_al.clients.client import FbgpClient
from fbgp_al.clients.metamodel import Metamodel
from fbgp_al.clients.ops import report
from fbgp_al.service.keys import campaign as key
from tests.service.conftest import next_ticket
from tests.service.test_observability import _scrape, _value

MCMC = {"chains": 2, "warmup": 20, "samples": 20}


def _by_state(client) -> dict[str, float]:
    """``fbgp_campaigns`` by state, from ``/metrics``."""
    states = ("design", "active", "failing", "stalled")
    return {s: _value(_scrape(client), "fbgp_campaigns", state=s) for s in states}


def _body(**changes) -> dict:
    body = {
        "name": "fails",
        "inputs": [{"name": "x", "lower": 0.0, "upper": 1.0}],
        "pool": {"type": "grid", "points_per_dim": 41},
        "max_labels": 12,
        "mcmc": MCMC,
        "seed": 4,
    }
    return {**body, **changes}


def _run(client, campaign: str, fails, labels: int) -> list[tuple[float, bool]]:
    """Run the simulator that fails where ``fails(x)`` until ``labels`` labels or no point:
    each point handed out and whether its run failed."""
    runs = []
    while sum(not failed for _, failed in runs) < labels:
        ticket = next_ticket(client, campaign)
        if ticket is None:
            break
        x = ticket["x"][0]
        if fails(x):
            r = client.post(
                f"/campaigns/{campaign}/fail",
                json={"ticket": ticket["ticket"], "reason": "diverged"},
            )
        else:
            y = {"ticket": ticket["ticket"], "y": float(np.sin(6 * x))}
            r = client.post(f"/campaigns/{campaign}/label", json=y)
        assert r.status_code in (200, 201), r.text
        runs.append((x, fails(x)))
    return runs


def _settled(client, campaign: str, seconds: float = 60) -> dict:
    """The status once no refit is queued or running."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status = client.get(f"/campaigns/{campaign}").json()
        if status["refit"] == "idle":
            return status
        time.sleep(0.05)
    raise AssertionError(f"the refit did not end: {status}")


def test_a_campaign_learns_where_its_simulator_fails(client):
    """Runs fail where x > 0.75: the sequential campaign waits for the refit that learns of each
    failure, so it does not walk into the region one grid point at a time; the model's failure
    model, /predict, the export and the Metamodel agree on p_success."""
    campaign = client.post("/campaigns", json=_body()).json()["id"]
    runs = _run(client, campaign, lambda x: x > 0.75, labels=10)
    failed = [x for x, bad in runs if bad]
    assert 1 <= len(failed) <= 3, runs
    _settled(client, campaign)
    model = client.get(f"/campaigns/{campaign}/model").json()
    assert model["failures"]["n_failures"] == len(failed)
    assert model["failures"]["min_success"] == 0.5
    x = [[0.1], [0.5], [0.95]]
    p = client.post(f"/campaigns/{campaign}/predict", json={"x": x}).json()["p_success"]
    # 0.95 is two grid steps from the nearest failure (here the design's, at 1.0, the only one)
    assert p[0] > 0.8 and p[2] < 0.25, p
    document = client.get(f"/campaigns/{campaign}/model/export").json()
    assert document["failures"] == model["failures"]
    offline = Metamodel.load(document).predict(np.array(x))
    np.testing.assert_allclose(offline.p_success, p, rtol=1e-9, atol=1e-12)
    assert dict(offline)["p_success"] is offline.p_success
    status = client.get(f"/campaigns/{campaign}").json()
    assert status["n_failed"] == len(failed)
    assert client.get(f"/campaigns/{campaign}/plots/failures.png").status_code == 200


def _fail_next(client, campaign: str) -> None:
    ticket = next_ticket(client, campaign)
    assert ticket is not None
    r = client.post(
        f"/campaigns/{campaign}/fail", json={"ticket": ticket["ticket"], "reason": "told to"}
    )
    assert r.status_code == 201, r.text


def test_a_failing_campaign_says_so_and_a_retry_keeps_the_evidence(client):
    """max_failures 1: two failures make the campaign ``failing`` in its status and the list; a
    retry forgives them (it goes on), and its failure model still counts them."""
    campaign = client.post("/campaigns", json=_body(max_failures=1)).json()["id"]
    _run(client, campaign, lambda x: False, labels=3)  # the design
    _fail_next(client, campaign)
    _fail_next(client, campaign)
    status = client.get(f"/campaigns/{campaign}").json()
    assert status["state"] == "failing" and status["failing"]
    listed = {c["id"]: c for c in client.get("/campaigns").json()}
    assert listed[campaign]["state"] == "failing" and listed[campaign]["n_failed"] == 2
    assert _by_state(client) == {"design": 0, "active": 0, "failing": 1, "stalled": 0}
    page = client.get("/").text
    assert "<span class='state-failing'>failing</span>" in page
    assert client.post(f"/campaigns/{campaign}/retry").status_code == 202
    status = _settled(client, campaign)
    assert status["state"] == "active" and status["n_forgiven"] == 2, status
    model = client.get(f"/campaigns/{campaign}/model").json()
    assert model["failures"]["n_failures"] == 2  # forgiven, not forgotten


def test_a_stalled_campaign_says_so_and_only_forgetting_lets_it_go_on(client):
    """With min_success 0.99 no point is left once a run failed: the campaign is ``stalled``,
    again after a plain retry (the same crashes are not re-run); a retry that forgets the
    failures (the simulator changed) lets it go on."""
    body = _body(failures={"model": "classifier", "min_success": 0.99})
    campaign = client.post("/campaigns", json=body).json()["id"]
    _run(client, campaign, lambda x: False, labels=3)
    _fail_next(client, campaign)
    status = _settled(client, campaign)
    assert status["state"] == "stalled" and status["stalled"], status
    assert client.get(f"/campaigns/{campaign}/next").status_code == 409
    assert _by_state(client)["stalled"] == 1
    assert "state-stalled" in client.get(f"/campaigns/{campaign}/view").text
    model = client.get(f"/campaigns/{campaign}/model").json()
    assert model["failures"]["n_failures"] == 1 and model["failures"]["excluded"] > 0
    assert client.post(f"/campaigns/{campaign}/retry").status_code == 202
    assert _settled(client, campaign)["state"] == "stalled"
    r = client.post(f"/campaigns/{campaign}/retry", json={"forget_failures": True})
    assert r.status_code == 202, r.text
    status = _settled(client, campaign)
    assert status["state"] == "active", status
    assert "failures" not in client.get(f"/campaigns/{campaign}/model").json()
    assert next_ticket(client, campaign) is not None
    assert client.post(f"/campaigns/{campaign}/retry", json={"forget": 1}).status_code == 422


def test_the_bracket_is_checked_and_the_model_carries_it(client):
    """``failures.bracket``: a distance in the unit cube, 0 to 1 (0 turns it off), a JSON
    number; the refit's failure model says the campaign's value and how many of its candidates
    lay between a failure and a success that near."""
    for bad in (-0.1, 1.5, "0.1", True):
        body = _body(failures={"model": "classifier", "bracket": bad})
        r = client.post("/campaigns", json=body)
        assert r.status_code == 422 and "bracket" in r.text, (bad, r.text)
    body = _body(failures={"model": "classifier", "bracket": 0.2}, max_labels=6)
    created = client.post("/campaigns", json=body).json()
    campaign = created["id"]
    assert created["failures"]["bracket"] == 0.2
    _run(client, campaign, lambda x: x > 0.75, labels=3)
    _fail_next(client, campaign)
    _settled(client, campaign)
    failures = client.get(f"/campaigns/{campaign}/model").json()["failures"]
    assert failures["bracket"] == 0.2 and isinstance(failures["bracketed"], int)
    assert failures["bracketed"] >= 0


def test_none_keeps_failures_out_of_every_model(client):
    campaign = client.post("/campaigns", json=_body(failures={"model": "none"})).json()["id"]
    _run(client, campaign, lambda x: False, labels=3)
    _fail_next(client, campaign)
    _settled(client, campaign)
    assert "failures" not in client.get(f"/campaigns/{campaign}/model").json()
    answer = client.post(f"/campaigns/{campaign}/predict", json={"x": [[0.5]]}).json()
    assert "p_success" not in answer


def test_a_campaign_stored_before_the_option_loads_and_runs(client, redis_url):
    """A spec without ``failures`` (as stored before it existed) gets the default failure
    model, and its status, /next and refits work."""
    campaign = client.post("/campaigns", json=_body()).json()["id"]
    redis = Redis.from_url(redis_url)
    spec = json.loads(redis.get(key(campaign, "spec")))
    del spec["failures"]
    redis.set(key(campaign, "spec"), json.dumps(spec))
    assert client.get(f"/campaigns/{campaign}").json()["state"] == "design"
    _run(client, campaign, lambda x: False, labels=3)
    _fail_next(client, campaign)
    _settled(client, campaign)
    assert client.get(f"/campaigns/{campaign}/model").json()["failures"]["n_failures"] == 1
    assert next_ticket(client, campaign) is not None


def test_a_two_output_campaign_draws_its_failure_model_and_the_sdk_reads_it(api_url):
    """Two outputs, runs failing where x > 0.75: the one failure model (over the inputs, for
    every output) is drawn (``plots/failures.png``, with or without ``output``), the report
    shows it, and the SDK's ``Client.model()`` carries it as ``GET .../model`` does."""
    body = _body(outputs=[{"name": "a"}, {"name": "b"}], max_labels=8)
    with httpx.Client(base_url=api_url, timeout=60) as http, FbgpClient(api_url, "") as api:
        campaign = http.post("/campaigns", json=body).json()["id"]
        runs = []
        while sum(not failed for _, failed in runs) < 8:
            ticket = next_ticket(http, campaign)
            if ticket is None:
                break
            x = ticket["x"][0]
            if x > 0.75:
                api.fail(campaign, ticket["ticket"], "diverged")
            else:
                api.label(campaign, ticket["ticket"], {"a": math.sin(6 * x), "b": x * x})
            runs.append((x, x > 0.75))
        assert any(failed for _, failed in runs), runs
        _settled(http, campaign)
        wire = http.get(f"/campaigns/{campaign}/model").json()["failures"]
        assert wire["n_failures"] == sum(failed for _, failed in runs)
        assert api.model(campaign).failures == wire
        for output in (None, "b"):
            assert api.plot(campaign, "failures", output).startswith(b"\x89PNG")
        shown = report.collect(api, campaign)["pictures"]
    assert "the failure model's P(failure)" in [alt for _, alt, _ in shown]
