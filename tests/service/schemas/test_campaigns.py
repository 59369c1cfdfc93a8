"""A campaign's body (:mod:`service.schemas.campaigns`) over HTTP: every bad campaign gets a 422
with a message, never a 500; and the paper's code's choices as campaign options, on the real
stack: inputs scaled by the labels, the ``paper-code`` MCMC preset and ``bald-code``;
``/evaluate``'s ``nlml_paper``; and 422s for settings that do not exist."""

import numpy as np
import pytest

from fbgp_al.worker import answers
from fbgp_al.worker.vocabulary.defaults import MCMC_PRESETS
from tests.service.conftest import wait_for_model

BAD_BODIES = {
    "unknown acquisition": {"acquisition": "ucb"},
    "lower >= upper": {"inputs": [{"name": "x", "lower": 1.0, "upper": 1.0}]},
    "no inputs": {"inputs": []},
    "empty point pool": {"pool": {"type": "points", "points": []}},
    "pool point outside bounds": {
        "pool": {"type": "points", "points": [[0.1], [1.0], [2.0], [3.0]]}
    },
    "pool point of wrong dimension": {"pool": {"type": "points", "points": [[1.0, 2.0]] * 4}},
    "max_labels below the design": {"max_labels": 2},
    "grid of one point": {"pool": {"type": "grid", "points_per_dim": 1}},
    "unknown pool type": {"pool": {"type": "sobol"}},
    "unknown field": {"colour": "red"},
    "thinning above samples": {"mcmc": {"chains": 2, "warmup": 10, "samples": 5, "thinning": 10}},
    "an input name with a right-to-left override": {
        "inputs": [{"name": "load\u202e", "lower": 0, "upper": 1}]
    },
    "an input name with a zero-width space": {
        "inputs": [{"name": "lo\u200bad", "lower": 0, "upper": 1}]
    },
    "a campaign name mixing Latin and Cyrillic letters": {"name": "b\u0435am"},
    "input names that look alike": {
        "inputs": [
            {"name": "y", "lower": 0, "upper": 1},
            {"name": "\u0443", "lower": 0, "upper": 1},
        ],
        "pool": {"type": "grid", "points_per_dim": 5},
    },
    "choice values that look alike": {
        "inputs": [{"name": "m", "type": "choice", "values": ["c", "\u0441"]}],
        "pool": {"type": "grid", "points_per_dim": 5},
    },
    "a negative noise floor": {"mcmc": {"noise_floor": -1e-6}},
    "a noise floor above a tenth of the labels' variance": {"mcmc": {"noise_floor": 0.5}},
    "a noise floor as text": {"mcmc": {"noise_floor": "1e-6"}},
    "duplicate input names": {
        "inputs": [{"name": "x", "lower": 0, "upper": 1}] * 2,
        "pool": {"type": "grid", "points_per_dim": 5},
    },
    "a range that overflows a float": {
        "inputs": [{"name": "x", "lower": -1e308, "upper": 1e308}],
        "pool": {"type": "grid", "points_per_dim": 10},
    },
    "repeated pool points": {
        "pool": {"type": "points", "points": [[0.5], [0.5], [1.0], [1.5], [2.0], [2.5]]},
        "max_labels": 4,
    },
    "more labels than pool points": {
        "pool": {"type": "points", "points": [[1.0], [1.5], [2.0]]},
        "max_labels": 5,
    },
}


@pytest.mark.parametrize("case", sorted(BAD_BODIES))
def test_bad_campaigns_are_422_with_a_message(client, make_body, case):
    r = client.post("/campaigns", json=make_body(**BAD_BODIES[case]))
    assert r.status_code == 422, r.text
    assert r.json()["detail"]


def test_a_paper_code_campaign_end_to_end(client, make_body):
    mcmc = dict(MCMC_PRESETS["paper-code"], warmup=30, samples=20, thinning=2)
    body = make_body(
        input_scaling="labels", mcmc=mcmc, acquisition="bald-code", allow_repeats=True, max_labels=8
    )
    created = client.post("/campaigns", json=body)
    assert created.status_code == 201, created.text
    spec = created.json()
    assert spec["input_scaling"] == "labels" and spec["mcmc"]["mode_rule"] == "kde-raw"
    assert spec["acquisition"] == "bald-code"
    campaign = spec["id"]
    x = [[0.7], [1.1], [1.6], [2.0]]
    y = [float(np.sin(10 * a[0])) for a in x]
    r = client.post(f"/campaigns/{campaign}/observations", json={"x": x, "y": y})
    assert r.status_code in (200, 201), r.text
    wait_for_model(client, campaign, 4)
    model = client.get(f"/campaigns/{campaign}/model").json()
    # the labels span 1.3 of the box's 2.0
    assert model["input_scale"] == pytest.approx([0.65], rel=1e-12)
    test_x, test_y = [[0.6], [1.3], [2.4]], [0.1, 0.4, -0.3]
    r = client.post(f"/campaigns/{campaign}/evaluate", json={"x": test_x, "y": test_y})
    assert r.status_code == 200, r.text
    got = r.json()
    labels = [{"x": a, "y": b} for a, b in zip(x, y, strict=True)]
    want = answers.metrics(spec, model, labels, test_x, test_y)
    assert got["nlml_paper"] == pytest.approx(want["nlml_paper"], rel=1e-9)
    assert got["nlml"] == pytest.approx(want["nlml"], rel=1e-9)
    assert client.get(f"/campaigns/{campaign}/next").status_code == 200


def test_a_default_campaign_scales_by_the_box_and_keeps_the_kde_mode(client, make_body):
    created = client.post("/campaigns", json=make_body())
    assert created.status_code == 201, created.text
    assert created.json()["input_scaling"] == "box"
    assert created.json()["mcmc"]["mode_rule"] == "kde"


@pytest.mark.parametrize(
    "change",
    [
        {"input_scaling": "data"},
        {"input_scaling": None},
        {"mcmc": {"mode_rule": "mean"}},
        {"acquisition": "bald-paper"},
    ],
)
def test_unknown_paper_code_settings_are_422(client, make_body, change):
    r = client.post("/campaigns", json=make_body(**change))
    assert r.status_code == 422, r.text
