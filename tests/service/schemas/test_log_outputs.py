"""Outputs modeled on the log scale (``"transform": "log"``) over the API, on the real stack:
the campaign bodies that declare them (and the 422s of those that cannot), a label, a
replicate, an import and a test value <= 0 refused with a 422 naming the output, and the
answers in the output's units: ``/predict``'s lognormal moments and quantiles, ``/evaluate``'s
densities of y, the model's ``y_transform``, the export's ``Metamodel`` (as ``/predict``, to
1e-10) and the page's model plot; one log output beside one modeled as is."""

import math

import numpy as np
import pytest

from fbgp_al.clients.metamodel import Metamodel
from tests.service.conftest import wait_for_model

LOG_KEYS = ("median", "lower", "upper", "mixture_median", "mixture_lower", "mixture_upper")
KEYS = ("mean", "variance", "mixture_mean", "mixture_variance", *LOG_KEYS)
DECLARED = '"transform": "log" (modeled on the log scale), so its values must be > 0'


def f(x: list) -> float:
    """Positive, 0.08 to 33 over the box [0.5, 2.5]."""
    return math.exp(3.0 * x[0] - 4.0)


def _next(client, campaign) -> dict:
    r = client.get(f"/campaigns/{campaign}/next")
    assert r.status_code == 200, r.text
    return r.json()


def _label(client, campaign, point, y):
    return client.post(f"/campaigns/{campaign}/label", json={"ticket": point["ticket"], **y})


def _same(local, served, what):
    for key in KEYS:
        want = np.asarray(served[key])
        np.testing.assert_allclose(
            local[key], want, rtol=1e-10, atol=1e-10 * np.abs(want).max(), err_msg=f"{what} {key}"
        )


def test_campaign_bodies_declare_log_outputs(client, make_body):
    created = client.post("/campaigns", json=make_body(transform="log"))
    assert created.status_code == 201 and created.json()["transform"] == "log", created.text
    assert "transform" not in client.post("/campaigns", json=make_body()).json()  # as before
    outputs = [{"name": "stress"}, {"name": "disp", "transform": "log"}]
    created = client.post("/campaigns", json=make_body(outputs=outputs))
    assert created.status_code == 201, created.text
    log = {"name": "disp", "weight": 1.0, "transform": "log"}
    assert created.json()["outputs"] == [{"name": "stress", "weight": 1.0}, log]
    for body, says in (
        (make_body(transform="sqrt"), "transform"),
        (make_body(outputs=[{"name": "a", "transform": "exp"}, {"name": "b"}]), "transform"),
        (make_body(transform="log", outputs=outputs), "declares each output"),
        (make_body(transform=None), "transform"),
    ):
        r = client.post("/campaigns", json=body)
        assert r.status_code == 422 and says in r.text, (body, r.text)


def test_a_log_campaign_refuses_values_at_or_below_zero_and_answers_in_its_units(client, make_body):
    body = make_body(transform="log", max_labels=8)
    campaign = client.post("/campaigns", json=body).json()["id"]
    point = _next(client, campaign)
    for bad in (0.0, -1.5):
        r = _label(client, campaign, point, {"y": bad})
        assert r.status_code == 422, r.text
        assert r.json()["detail"] == f"y: this campaign's output is declared {DECLARED}; got {bad}"
    r = client.post(
        f"/campaigns/{campaign}/observations", json={"x": [[1.0], [2.0]], "y": [f([1.0]), -2.0]}
    )
    assert r.status_code == 422 and r.json()["detail"].startswith("y[1]: this campaign's output")
    assert "got -2.0" in r.json()["detail"]
    assert client.get(f"/campaigns/{campaign}").json()["n_labeled"] == 0  # none stored
    for k in range(3):
        point = point if k == 0 else _next(client, campaign)
        r = _label(client, campaign, point, {"y": f(point["x"])})
        assert r.status_code == 201, r.text
    r = client.post(
        f"/campaigns/{campaign}/observations", json={"x": [[0.6], [2.4]], "y": [f([0.6]), f([2.4])]}
    )
    assert r.status_code == 201, r.text
    wait_for_model(client, campaign, 5)

    model = client.get(f"/campaigns/{campaign}/model").json()
    assert model["transform"]["y_transform"] == "log"
    observed = client.get(f"/campaigns/{campaign}/observations").json()
    assert model["transform"]["y_mean"] == pytest.approx(np.log(observed["y"]).mean(), rel=1e-12)
    assert all(v > 0 for v in observed["y"])  # stored in y's units, as posted
    x = [[0.5], [1.1], [1.7], [2.5]]
    p = client.post(f"/campaigns/{campaign}/predict", json={"x": x})
    assert p.status_code == 200, p.text
    p = p.json()
    assert all(min(p[key]) > 0 for key in KEYS)
    lower, median, upper, mean = (np.array(p[k]) for k in ("lower", "median", "upper", "mean"))
    assert np.all(lower < median) and np.all(median < upper) and np.all(median < mean)
    assert np.all(np.array(p["mixture_lower"]) < np.array(p["mixture_upper"]))

    r = client.post(
        f"/campaigns/{campaign}/evaluate", json={"x": x, "y": [f(v) for v in x[:3]] + [0.0]}
    )
    assert r.status_code == 422 and r.json()["detail"].startswith("y[3]: this campaign's output")
    e = client.post(f"/campaigns/{campaign}/evaluate", json={"x": x, "y": [f(v) for v in x]})
    assert e.status_code == 200, e.text
    e = e.json()
    # the densities of y itself: the GP's (of standardized log y) and the Jacobian
    jacobian = math.log(model["transform"]["y_std"]) + np.mean([math.log(f(v)) for v in x])
    assert e["nlpd_mixture_y"] == pytest.approx(e["nlpd_mixture"] + jacobian, rel=1e-9)
    assert e["nlml_y"] == pytest.approx(e["nlml"] + jacobian, rel=1e-9)
    assert e["rmse"] == pytest.approx(np.sqrt(np.mean((mean - [f(v) for v in x]) ** 2)))
    assert model["accuracy"]["loo_rmse"] > 0 and model["accuracy"]["ipv"] > 0

    document = client.get(f"/campaigns/{campaign}/model/export").json()
    assert document["transform"]["y_transform"] == "log" and document["format_version"] == 3
    _same(Metamodel.load(document).predict(x), p, "export")
    # the indices of the mean of log y, the scale it is modeled on, here and at home alike
    served = client.get(f"/campaigns/{campaign}/sensitivity").json()
    home = Metamodel.load(document).sensitivity()
    assert served["variance"]["mean"] == pytest.approx(home["variance"]["mean"], rel=1e-9)
    png = client.get(f"/campaigns/{campaign}/plots/model.png")
    assert png.status_code == 200 and png.content[:4] == b"\x89PNG"


def test_replicates_of_a_log_output_with_known_noise(client, make_body):
    """Each replicate must be > 0; the label is their mean, its noise the variance of that mean,
    taken to log y by the delta method (``noise / y^2``)."""
    body = make_body(transform="log", noise={"type": "known"})
    campaign = client.post("/campaigns", json=body).json()["id"]
    point = _next(client, campaign)
    r = _label(client, campaign, point, {"y_replicates": [2.0, 4.0, -0.5]})
    assert r.status_code == 422, r.text
    assert r.json()["detail"] == (
        f"y_replicates: this campaign's output is declared {DECLARED}; got -0.5"
    )
    r = _label(client, campaign, point, {"y": 0.0, "noise": 0.1})
    assert r.status_code == 422 and "got 0.0" in r.json()["detail"]
    r = _label(client, campaign, point, {"y_replicates": [2.0, 4.0]})
    assert r.status_code == 201 and r.json()["y"] == 3.0, r.text
    for _ in range(2):
        point = _next(client, campaign)
        label = {"y": f(point["x"]), "noise": 0.01 * f(point["x"]) ** 2}
        assert _label(client, campaign, point, label).status_code == 201
    wait_for_model(client, campaign, 3)
    x = [[0.7], [2.2]]
    p = client.post(f"/campaigns/{campaign}/predict", json={"x": x}).json()
    document = client.get(f"/campaigns/{campaign}/model/export").json()
    _same(Metamodel.load(document).predict(x), p, "export")
    e = client.post(
        f"/campaigns/{campaign}/evaluate",
        json={"x": x, "y": [f(v) for v in x], "noise": [0.01, 0.02]},
    )
    assert e.status_code == 200 and math.isfinite(e.json()["nlpd_mixture_y"]), e.text


def test_one_log_output_beside_one_modeled_as_is(client, make_body):
    outputs = [{"name": "stress"}, {"name": "disp", "transform": "log"}]
    body = make_body(outputs=outputs, max_labels=8)
    campaign = client.post("/campaigns", json=body).json()["id"]

    def y(x):
        return {"stress": math.sin(3 * x[0]), "disp": f(x)}  # stress changes sign

    r = _label(client, campaign, _next(client, campaign), {"y": {"stress": 1.0, "disp": -0.2}})
    assert r.status_code == 422 and r.json()["detail"] == (
        f"y['disp']: output 'disp' is declared {DECLARED}; got -0.2"
    )
    columns = {"stress": [-1.0, -2.0], "disp": [1.0, 0.0]}
    r = client.post(f"/campaigns/{campaign}/observations", json={"x": [[1.0], [2.0]], "y": columns})
    assert r.status_code == 422 and r.json()["detail"].startswith("y[1]['disp']: output 'disp'")
    xs = [[0.5], [1.0], [1.6], [2.5]]
    r = client.post(f"/campaigns/{campaign}/observations", json={"x": xs, "y": [y(x) for x in xs]})
    assert r.status_code == 201, r.text
    wait_for_model(client, campaign, 4)
    model = client.get(f"/campaigns/{campaign}/model").json()
    assert model["outputs"]["disp"]["transform"]["y_transform"] == "log"
    assert "y_transform" not in model["outputs"]["stress"]["transform"]
    x = [[0.8], [1.3], [2.1]]
    p = client.post(f"/campaigns/{campaign}/predict", json={"x": x}).json()["outputs"]
    assert set(LOG_KEYS) <= set(p["disp"]) and not set(LOG_KEYS) & set(p["stress"])
    assert min(p["disp"]["mean"]) > 0
    document = client.get(f"/campaigns/{campaign}/model/export").json()
    assert document["format_version"] == 3  # an older reader refuses it
    home = Metamodel.load(document).predict(x)
    _same(home["disp"], p["disp"], "disp")
    assert home["stress"].median is None
    columns = {"stress": [0.0] * 3, "disp": [1.0, -1.0, 1.0]}
    r = client.post(f"/campaigns/{campaign}/evaluate", json={"x": x, "y": columns})
    assert r.status_code == 422 and "y[1]['disp']" in r.json()["detail"]
    e = client.post(
        f"/campaigns/{campaign}/evaluate", json={"x": x, "y": [y(v) for v in x]}
    ).json()["outputs"]
    assert all(math.isfinite(e[k]["nlpd_mixture_y"]) for k in ("stress", "disp"))
    png = client.get(f"/campaigns/{campaign}/plots/model.png?output=disp")
    assert png.status_code == 200 and png.content[:4] == b"\x89PNG"
