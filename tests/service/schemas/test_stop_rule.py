"""A campaign's stopping rule and ``/resume``'s body (:mod:`service.schemas.stop_rule`) over HTTP:
bad rules are 422s naming the field."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    "stop",
    [
        {},
        {"patience": 2},
        {"ipv": 0},
        {"ipv": -1.0},
        {"ipv": "1"},
        {"ipv": True},
        {"loo_rmse": 0.1, "patience": 0},
        {"loo_rmse": 0.1, "min_labels": 0},
        {"loo_rmse": 0.1, "min_labels": 7},
        {"rmse": 0.1},
        {"loo_nlpd": 0.1},
        [0.1],
    ],
)
def test_bad_rules_are_422_naming_the_field(client, make_body, stop):
    r = client.post("/campaigns", json=make_body(stop=stop))  # max_labels 6
    assert r.status_code == 422, r.text
    assert "stop" in str(r.json()), r.text


def test_non_finite_thresholds_are_422(client):
    for raw in ("1e999", "NaN", "Infinity"):
        content = (
            '{"inputs": [{"name": "x", "lower": 0, "upper": 1}], "max_labels": 5, '
            '"pool": {"type": "grid", "points_per_dim": 11}, "stop": {"ipv": ' + raw + "}}"
        )
        r = client.post("/campaigns", content=content, headers={"Content-Type": "application/json"})
        assert r.status_code == 422 and "stop" in r.text, (raw, r.text)


def test_resume_validates_its_rule(client, make_body):
    campaign = client.post("/campaigns", json=make_body(stop={"ipv": 1.0})).json()["id"]
    url = f"/campaigns/{campaign}/resume"
    assert client.post(url, json={"stop": {}}).status_code == 422
    assert client.post(url, json={"stop": {"ipv": 1.0, "min_labels": 99}}).status_code == 422
    assert client.post(url, json={"rule": None}).status_code == 422
    assert client.post(url, json={"stop": {"ipv": 1.0}}).status_code == 409  # not stopped
    assert client.post("/campaigns/nope/resume").status_code == 404
