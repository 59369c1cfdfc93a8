"""/metrics moves as a campaign runs; log lines are JSON with the campaign's id."""

import json
import logging

from prometheus_client.parser import text_string_to_metric_families
from redis import Redis

from fbgp_al.service.observability import JsonFormatter
from tests.service.conftest import label_design, wait_for_model


def _scrape(client) -> dict:
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def _value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_move_as_a_campaign_runs(client, make_body):
    assert client.get("/livez").json() == {"status": "ok"}
    before = _scrape(client)
    campaign = client.post("/campaigns", json=make_body(max_labels=8)).json()["id"]
    label_design(client, campaign, (0.1, 0.9, -0.4))
    wait_for_model(client, campaign, 3)
    after = _scrape(client)
    assert (
        _value(after, "fbgp_labels_stored_total") - _value(before, "fbgp_labels_stored_total") == 3
    )
    route = "/campaigns/{campaign_id}/label"
    key = {"method": "POST", "route": route, "status": "201"}
    assert (
        _value(after, "fbgp_http_requests_total", **key)
        - _value(before, "fbgp_http_requests_total", **key)
        == 3
    )
    assert _value(after, "fbgp_refit_seconds_count") > _value(before, "fbgp_refit_seconds_count")
    assert _value(after, "fbgp_campaigns", state="active") >= 1
    assert ("fbgp_queue_depth", (("queue", "fbgp-refit"),)) in after
    assert ("fbgp_jobs_failed", (("queue", "fbgp-refit"),)) in after


def test_request_log_lines_are_json_with_the_campaign(client, make_body, caplog):
    campaign = client.post("/campaigns", json=make_body()).json()["id"]
    with caplog.at_level(logging.INFO, logger="fbgp.api"):
        client.get(f"/campaigns/{campaign}")
    lines = [json.loads(JsonFormatter().format(r)) for r in caplog.records if r.name == "fbgp.api"]
    line = lines[-1]
    assert line["campaign"] == campaign and line["status"] == 200
    assert line["route"] == "/campaigns/{campaign_id}" and line["level"] == "info"
    assert line["seconds"] >= 0 and line["time"].endswith("Z")
    assert "waited" not in line

    # a long poll notes how long it waited, so that its service time shows apart
    for _ in range(3):  # the design is out: the next poll waits for labels
        client.get(f"/campaigns/{campaign}/next")
    with caplog.at_level(logging.INFO, logger="fbgp.api"):
        assert client.get(f"/campaigns/{campaign}/next", params={"wait": 0.6}).status_code == 202
    line = json.loads(JsonFormatter().format(caplog.records[-1]))
    assert line["route"].endswith("/next") and line["status"] == 202
    assert 0.5 <= line["waited"] <= line["seconds"] < line["waited"] + 0.5


def test_a_log_line_stays_short_whatever_a_client_sends(client, caplog):
    """A 60,000-character id is cut in the line that logs its request (it was logged whole)."""
    with caplog.at_level(logging.INFO, logger="fbgp.api"):
        r = client.get(f"/campaigns/{'x' * 60_000}")
    assert r.status_code in (404, 414, 422)
    text = JsonFormatter().format(caplog.records[-1])
    line = json.loads(text)
    assert len(text) < 3_000 and line["campaign"].startswith("x" * 100)
    assert line["campaign"].endswith("(59900 more)")
    record = logging.makeLogRecord(
        {
            "msg": "reason: " + "y" * 10_000,
            "levelno": logging.INFO,
            "levelname": "INFO",
            "job": "j" * 500,
        }
    )
    out = json.loads(JsonFormatter().format(record))
    assert len(out["message"]) < 2_100 and len(out["job"]) < 120


def _by_state(client) -> dict[str, float]:
    samples = _scrape(client)
    return {s: _value(samples, "fbgp_campaigns", state=s) for s in ("design", "active", "done")}


def test_campaigns_by_state_are_counted_not_scanned(client, make_body, redis_url):
    """The count by state follows creates, labels, imports and deletes, agrees with the
    campaigns' own status, and is rebuilt exactly where it was never kept."""
    assert _by_state(client) == {"design": 0, "active": 0, "done": 0}
    small = make_body(max_labels=3)  # done once its design is labeled
    ids = [client.post("/campaigns", json=make_body(max_labels=8)).json()["id"] for _ in range(3)]
    ids.append(client.post("/campaigns", json=small).json()["id"])
    assert _by_state(client) == {"design": 4, "active": 0, "done": 0}
    label_design(client, ids[0], range(3))  # design -> active
    label_design(client, ids[3], range(3))  # design -> done
    r = client.post(f"/campaigns/{ids[1]}/observations", json={"x": [[0.5], [1.0]], "y": [0, 1]})
    assert r.status_code == 201  # still in its design
    assert client.delete(f"/campaigns/{ids[2]}").status_code == 204
    assert client.delete(f"/campaigns/{ids[2]}").status_code == 404  # counted off once only
    expected = {"design": 1, "active": 1, "done": 1}
    assert _by_state(client) == expected
    states = [client.get(f"/campaigns/{i}").json()["state"] for i in (ids[0], ids[1], ids[3])]
    assert sorted(states) == ["active", "design", "done"]
    Redis.from_url(redis_url).delete("fbgp:metrics:campaigns")  # a store from before the count
    assert _by_state(client) == expected
