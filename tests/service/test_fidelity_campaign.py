"""A campaign with fidelities end to end, against the real Redis and worker: the refit samples
the multi-fidelity model (warm from the previous one) and ranks points at levels, ``/next``
hands out the chosen run and its level, ``GET .../model`` reports each learned ``rho``, the labels
and cost per level and the sampler's diagnostics, ``/predict`` answers the top level or the one
asked (422 for an unknown one), ``/evaluate`` and ``/sensitivity`` the top level, the export
predicts offline as ``/predict`` does, and the page shows the levels, the cost spent and
``rho``, with each level's model over its one input."""

import math

import pytest

from fbgp_al.clients.metamodel import Metamodel
from tests.service.conftest import wait_for_model

LEVELS = [{"name": "coarse", "cost": 1}, {"name": "fine", "cost": 10}]
FAST = {"chains": 2, "warmup": 30, "samples": 20, "thinning": 2}


def forrester(x: float, level: str) -> float:
    fine = (6 * x - 2) ** 2 * math.sin(12 * x - 4)
    return fine if level == "fine" else 0.5 * fine + 10 * (x - 0.5) - 5


def _label(client, campaign, ticket):
    y = forrester(ticket["x"][0], ticket["fidelity"])
    r = client.post(f"/campaigns/{campaign}/label", json={"ticket": ticket["ticket"], "y": y})
    assert r.status_code == 201, r.text


def test_a_campaign_with_fidelities_learns_and_answers_its_top_level(client, make_body):
    body = make_body(
        inputs=[{"name": "x", "lower": 0.0, "upper": 1.0}],
        pool={"type": "grid", "points_per_dim": 41},
        fidelities=LEVELS,
        initial_design={"size": 6},
        max_labels=8,
        mcmc=FAST,
    )
    campaign = client.post("/campaigns", json=body).json()["id"]
    for _ in range(6):
        _label(client, campaign, client.get(f"/campaigns/{campaign}/next").json())
    wait_for_model(client, campaign, 6, seconds=120)
    model = client.get(f"/campaigns/{campaign}/model").json()
    body = model["fidelity"]
    assert body["levels"] == ["coarse", "fine"] and len(body["rho"]) == 1
    assert body["labels_per_level"] == {"coarse": 4, "fine": 2} and body["cost_spent"] == 24.0
    assert "rho_0" in model["diagnostics"]["rhat"] and model["diagnostics"]["warm_start"] == "cold"
    assert model["accuracy"]["level"] == 1
    for version in (6, 7):
        ticket = client.get(f"/campaigns/{campaign}/next").json()
        assert ticket["model_version"] == version and ticket["fidelity"] in ("coarse", "fine")
        _label(client, campaign, ticket)
        wait_for_model(client, campaign, version + 1, seconds=120)
    # the last label's model in: /predict and the export below read the same model
    again = client.get(f"/campaigns/{campaign}/model").json()
    assert again["version"] == 8
    assert again["diagnostics"]["warm_start"] != "cold"  # warm from model 7
    url = f"/campaigns/{campaign}/predict"
    top = client.post(url, json={"x": [[0.2], [0.9]]}).json()
    cheap = client.post(url, json={"x": [[0.2], [0.9]], "fidelity": "coarse"}).json()
    assert top["fidelity"] == ["fine", "fine"] and cheap["fidelity"] == ["coarse", "coarse"]
    assert top["mixture_mean"] != cheap["mixture_mean"]
    r = client.post(url, json={"x": [[0.2]], "fidelity": "medium"})
    assert r.status_code == 422 and "unknown level 'medium'" in r.json()["detail"]
    xs = [0.1, 0.4, 0.6, 0.95]
    test = {"x": [[v] for v in xs], "y": [forrester(v, "fine") for v in xs]}
    metrics = client.post(f"/campaigns/{campaign}/evaluate", json=test).json()
    assert metrics["rmse"] > 0 and math.isfinite(metrics["nlpd_mixture"])
    r = client.post(f"/campaigns/{campaign}/evaluate", json={**test, "fidelity": ["coarse"] * 4})
    assert r.status_code == 422
    page = client.get(f"/campaigns/{campaign}/view").text
    assert "id='fidelities'" in page and "id='rho-0'" in page and "id='cost'" in page
    assert "The model at each fidelity level" in page and "posterior-mode GP" not in page
    assert "coarse" not in page.split("id='inputs'")[1].split("</p>")[0]
    png = client.get(f"/campaigns/{campaign}/plots/model.png")
    assert png.status_code == 200 and png.content[:4] == b"\x89PNG"
    indices = client.get(f"/campaigns/{campaign}/sensitivity").json()
    assert indices["inputs"] == ["x"] and indices["method"] == "monte-carlo"
    assert indices["total"]["mean"][0] == pytest.approx(1.0, abs=0.05)  # one input: all of it
    exported = client.get(f"/campaigns/{campaign}/model/export").json()
    assert exported["format_version"] == 4 and exported["fidelity"]["levels"] == ["coarse", "fine"]
    offline = Metamodel.load(exported).predict([[0.2], [0.9]])
    assert offline["mixture_mean"].tolist() == pytest.approx(top["mixture_mean"], rel=1e-9)
