"""Refit supervision (:mod:`service.store.refits`): failures are recorded and survived, and
ill-conditioned data refits through the service. Refits revived: test_revivals.py."""

import json
import math
import time

import pytest
from redis import Redis

from tests.worker.test_fitting import CASES


def _wait(predicate, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


def _design(client, campaign, ys=(0.1, 0.9, -0.4)):
    for y in ys:
        t = client.get(f"/campaigns/{campaign}/next").json()["ticket"]
        assert (
            client.post(f"/campaigns/{campaign}/label", json={"ticket": t, "y": y}).status_code
            == 201
        )


def test_failed_refit_records_the_error_and_keeps_the_previous_model(client, make_body, settings):
    campaign = client.post("/campaigns", json=make_body(max_labels=8)).json()["id"]
    _design(client, campaign)
    _wait(lambda: client.get(f"/campaigns/{campaign}").json()["model_version"] == 3)
    # break the campaign behind the API's back: the next refit fails in the worker
    redis = Redis.from_url(settings.redis_url)
    key = f"fbgp:c:{campaign}:spec"
    spec = json.loads(redis.get(key))
    redis.set(key, json.dumps(dict(spec, acquisition="no-such-acquisition")))
    point = client.get(f"/campaigns/{campaign}/next").json()
    assert (
        client.post(
            f"/campaigns/{campaign}/label", json={"ticket": point["ticket"], "y": 0.3}
        ).status_code
        == 201
    )
    status = _wait(lambda: (s := client.get(f"/campaigns/{campaign}").json())["last_error"] and s)
    assert "no-such-acquisition" in status["last_error"]
    assert status["model_version"] == 3 and status["n_labeled"] == 4
    assert client.get(f"/campaigns/{campaign}/model").json()["version"] == 3
    # repaired, the next label's refit succeeds and clears the error
    redis.set(key, json.dumps(spec))
    _wait(lambda: client.get(f"/campaigns/{campaign}").json()["refit"] == "idle")
    r = client.post(f"/campaigns/{campaign}/observations", json={"x": [[1.234]], "y": [0.5]})
    assert r.status_code == 201
    status = _wait(
        lambda: (s := client.get(f"/campaigns/{campaign}").json())["model_version"] == 5 and s
    )
    assert status["last_error"] is None
    events = client.get(f"/campaigns/{campaign}/history").json()
    assert [e["event"] for e in events] == ["model", "refit_failed", "model"]
    assert [e.get("version") for e in events] == [3, None, 5] and events[0]["max_rhat"] > 0


@pytest.mark.parametrize("case", sorted(CASES))
def test_ill_conditioned_data_refits_through_the_service(client, make_body, case):
    """Duplicates, constant, huge and tiny outputs, a single label: imported, refitted by the
    worker, and served without NaN."""
    x, y = CASES[case]
    body = make_body(
        inputs=[{"name": "x", "lower": 0.0, "upper": 10.0}],
        initial_design={"size": 1},
        allow_repeats=True,
        max_labels=20,
    )
    campaign = client.post("/campaigns", json=body).json()["id"]
    r = client.post(f"/campaigns/{campaign}/observations", json={"x": [[v] for v in x], "y": y})
    assert r.status_code == 201, r.text
    status = _wait(
        lambda: (
            (s := client.get(f"/campaigns/{campaign}").json())["refit"] == "idle"
            and s["model_version"] == len(x)
            and s
        )
    )
    assert status["last_error"] is None
    model = client.get(f"/campaigns/{campaign}/model").json()
    draws = model["samples"]["lengthscale"] + [[v] for v in model["samples"]["noise"]]
    assert all(math.isfinite(v) and v > 0 for row in draws for v in row)
    pred = client.post(f"/campaigns/{campaign}/predict", json={"x": [[0.0], [5.0], [10.0]]})
    assert pred.status_code == 200, pred.text
    assert all(math.isfinite(v) for k in ("mean", "variance") for v in pred.json()[k])
