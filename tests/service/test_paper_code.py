"""The paper's code's choices over the API, on the real stack: a campaign with inputs scaled by
its labels, the ``paper-code`` MCMC preset and ``bald-code``; ``/evaluate``'s ``nlml_paper``; and
422s for settings that do not exist."""

import numpy as np
import pytest

from tests.service.conftest import wait_for_model
from worker import answers
from worker.spec.defaults import MCMC_PRESETS


def test_a_paper_code_campaign_end_to_end(client, make_body):
    mcmc = dict(MCMC_PRESETS["paper-code"], warmup=30, samples=20, thinning=2)
    body = make_body(input_scaling="labels", mcmc=mcmc, acquisition="bald-code",
                     allow_repeats=True, max_labels=8)  # fmt: skip
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


@pytest.mark.parametrize("change", [{"input_scaling": "data"}, {"input_scaling": None},
                                    {"mcmc": {"mode_rule": "mean"}},
                                    {"acquisition": "bald-paper"}])  # fmt: skip
def test_unknown_paper_code_settings_are_422(client, make_body, change):
    r = client.post("/campaigns", json=make_body(**change))
    assert r.status_code == 422, r.text
