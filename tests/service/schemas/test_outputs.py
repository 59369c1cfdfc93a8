"""A campaign's outputs and the noise of its labels (:mod:`service.schemas.outputs`) over the API,
on the real stack. Several outputs: a two-output campaign with mixed inputs through its design,
refits, ``/next``, ``/label`` (and its 422s), ``/predict``, ``/evaluate``, ``/acquisition``,
``/observations`` (JSON and CSV), the export and its ``Metamodel``, and the page; and each
output's posterior against a single-output campaign on the same labels. Known noise: a campaign
whose labels carry their noise variances (``noise`` or ``y_replicates``), idempotency on y and
noise, imports, exports (JSON and CSV) and ``/evaluate`` with the test points' noise; 422s for
noise settings that do not exist."""

import csv
import io
import json
import math
import statistics

import numpy as np
import pytest

from fbgp_al.clients.metamodel import Metamodel
from fbgp_al.worker import answers
from tests.service.conftest import observations_csv, wait_for_model

INPUTS = [
    {"name": "x", "lower": 0.0, "upper": 1.0},
    {"name": "n", "type": "int", "lower": 1, "upper": 5},
    {"name": "mat", "type": "choice", "values": ["steel", "alu"]},
]
OUTPUTS = [{"name": "stress", "weight": 2.0}, {"name": "disp"}]
MCMC = {"chains": 2, "warmup": 30, "samples": 20, "thinning": 2}


def simulate(x: list) -> dict:
    """Two outputs of very different scales."""
    stiff = 1.0 if x[2] == "steel" else 0.4
    stress = 1e4 * (math.sin(6 * x[0]) + 0.3 * x[1]) * stiff
    disp = 1e-3 * (x[0] ** 2 + 0.1 * x[1]) / stiff
    return {"stress": stress, "disp": disp}


def _body(make_body, **changes):
    body = {
        "inputs": INPUTS,
        "outputs": OUTPUTS,
        "pool": {"type": "grid", "points_per_dim": 9},
        "max_labels": 6,
        "mcmc": MCMC,
        "seed": 5,
    }
    return make_body(**{**body, **changes})


def _label_next(client, campaign):
    point = client.get(f"/campaigns/{campaign}/next")
    assert point.status_code == 200, point.text
    ticket, x = point.json()["ticket"], point.json()["x"]
    r = client.post(f"/campaigns/{campaign}/label", json={"ticket": ticket, "y": simulate(x)})
    assert r.status_code == 201, r.text
    return x


def test_campaign_bodies_with_outputs_are_checked(client, make_body):
    created = client.post("/campaigns", json=_body(make_body))
    assert created.status_code == 201, created.text
    assert created.json()["outputs"] == [
        {"name": "stress", "weight": 2.0},
        {"name": "disp", "weight": 1.0},
    ]
    assert "outputs" not in client.post("/campaigns", json=make_body()).json()
    for outputs in (
        [{"name": "a"}],
        [{"name": "a"}, {"name": "a"}],
        [{"name": "a", "weight": 0}, {"name": "b"}],
        [{"name": "a", "weight": -1}, {"name": "b"}],
        [{"name": ""}, {"name": "b"}],
        [{"name": f"o{i}"} for i in range(17)],
        [{"name": "a b"}, {"name": "b"}],
    ):
        r = client.post("/campaigns", json=make_body(outputs=outputs))
        assert r.status_code == 422, (outputs, r.text)
    # one output named, or none: what to send instead (a campaign of one leaves outputs out)
    for outputs in ([{"name": "strain"}], []):
        detail = client.post("/campaigns", json=make_body(outputs=outputs)).json()["detail"]
        assert f"outputs: {len(outputs)} named; name 2 to 16 outputs, or leave `outputs` out" in (
            detail
        )


def test_a_two_output_campaign_end_to_end(client, make_body):
    campaign = client.post("/campaigns", json=_body(make_body)).json()["id"]
    url = f"/campaigns/{campaign}/label"
    first = client.get(f"/campaigns/{campaign}/next").json()
    for bad, says in (
        ({"y": 1.0}, "several outputs"),
        ({"y": {"stress": 1.0}}, "'disp' is missing"),
        ({"y": {"stress": 1.0, "disp": 2.0, "temp": 3.0}}, "unknown output 'temp'"),
        ({"y": {"stress": "a", "disp": 2.0}}, "stress"),
        ({"y": {"stress": 1.0, "disp": 2.0}, "noise": {"stress": 0.1, "disp": 0.1}}, "noise"),
    ):
        r = client.post(url, json={"ticket": first["ticket"], **bad})
        assert r.status_code == 422 and says in r.json()["detail"], (bad, r.text)
    y0 = simulate(first["x"])
    r = client.post(url, json={"ticket": first["ticket"], "y": y0})
    assert r.status_code == 201 and r.json()["y"] == y0, r.text
    # the same label again (whatever the order of its outputs) is 200; another output value 409
    same = {"disp": y0["disp"], "stress": y0["stress"]}
    assert client.post(url, json={"ticket": first["ticket"], "y": same}).status_code == 200
    other = dict(y0, disp=y0["disp"] + 1)
    assert client.post(url, json={"ticket": first["ticket"], "y": other}).status_code == 409
    xs = [first["x"]] + [_label_next(client, campaign) for _ in range(2)]
    wait_for_model(client, campaign, 3)
    xs.append(_label_next(client, campaign))  # chosen by the combined acquisition
    wait_for_model(client, campaign, 4)
    # a failed run, for the CSV's failure row
    ticket = client.get(f"/campaigns/{campaign}/next").json()["ticket"]
    assert (
        client.post(
            f"/campaigns/{campaign}/fail", json={"ticket": ticket, "reason": "mesh"}
        ).status_code
        == 201
    )

    model = client.get(f"/campaigns/{campaign}/model").json()
    assert set(model["outputs"]) == {"stress", "disp"} and model["version"] == 4
    for name in ("stress", "disp"):  # each output warm-started from its own previous posterior
        assert model["outputs"][name]["diagnostics"]["warm_start"] != "cold"
        assert model["outputs"][name]["adaptation"]
    assert "samples" not in model and "y_mean" not in model["transform"]
    assert model["features"] == ["x", "n", "mat=steel", "mat=alu"]
    for name in ("stress", "disp"):  # each output standardized on its own
        values = np.array([simulate(x)[name] for x in xs])
        t = model["outputs"][name]["transform"]
        assert t["y_mean"] == pytest.approx(values.mean(), rel=1e-12)
        assert t["y_std"] == pytest.approx(values.std(ddof=1), rel=1e-12)
        assert model["outputs"][name]["accuracy"]["loo_rmse"] > 0
    assert model["accuracy"]["loo_rmse"] == max(
        o["accuracy"]["loo_rmse"] for o in model["outputs"].values()
    )

    test_x = [[0.1, 2, "alu"], [0.7, 5, "steel"], [0.5, 1, "steel"]]
    p = client.post(f"/campaigns/{campaign}/predict", json={"x": test_x})
    assert p.status_code == 200, p.text
    p = p.json()
    assert p["model_version"] == 4 and set(p["outputs"]) == {"stress", "disp"}
    assert all(len(p["outputs"][k]["mean"]) == 3 for k in p["outputs"])
    assert abs(p["outputs"]["stress"]["mean"][1]) > 100 * abs(p["outputs"]["disp"]["mean"][1])

    truth = [simulate(x) for x in test_x]
    columns = {k: [t[k] for t in truth] for k in ("stress", "disp")}
    for y in (columns, truth):  # {name: [...]} or one object per point
        e = client.post(f"/campaigns/{campaign}/evaluate", json={"x": test_x, "y": y})
        assert e.status_code == 200, e.text
        e = e.json()
        assert set(e["outputs"]) == {"stress", "disp"} and e["model_version"] == 4
        for k in ("stress", "disp"):
            rmse = np.sqrt(np.mean((np.array(p["outputs"][k]["mean"]) - columns[k]) ** 2))
            assert e["outputs"][k]["rmse"] == pytest.approx(rmse, rel=1e-9)
    r = client.post(f"/campaigns/{campaign}/evaluate", json={"x": test_x, "y": [1.0, 2.0, 3.0]})
    assert r.status_code == 422 and "several outputs" in r.json()["detail"]
    r = client.post(
        f"/campaigns/{campaign}/evaluate", json={"x": test_x, "y": {"stress": [1.0, 2.0, 3.0]}}
    )
    assert r.status_code == 422 and "'disp' is missing" in r.json()["detail"]

    a = client.post(f"/campaigns/{campaign}/acquisition", json={"x": test_x}).json()
    combined = 2.0 * np.array(a["outputs"]["stress"]) + np.array(a["outputs"]["disp"])
    np.testing.assert_allclose(a["values"], combined, rtol=1e-12)

    observed = client.get(f"/campaigns/{campaign}/observations").json()
    assert observed["y"] == [simulate(x) for x in xs] and len(observed["failures"]) == 1
    text = client.get(f"/campaigns/{campaign}/observations", headers={"Accept": "text/csv"}).text
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["x", "n", "mat", "y_stress", "y_disp", "status", "reason"]
    assert float(rows[1][3]) == y0["stress"] and float(rows[1][4]) == y0["disp"]
    assert rows[-1][3:] == ["", "", "failed", "mesh"]

    document = client.get(f"/campaigns/{campaign}/model/export").json()
    assert document["format_version"] == 2 and set(document["outputs"]) == {"stress", "disp"}
    home = Metamodel.load(document).predict(test_x)
    for k in ("stress", "disp"):
        for field in ("mean", "variance", "mixture_mean", "mixture_variance"):
            np.testing.assert_allclose(
                home[k][field],
                p["outputs"][k][field],
                rtol=1e-10,
                atol=1e-10 * max(1.0, np.abs(p["outputs"][k][field]).max()),
            )

    page = client.get(f"/campaigns/{campaign}/view").text
    assert "id='accuracy-stress'" in page and "id='plot-model-disp'" not in page  # 3 inputs
    assert "plot-posterior-disp" in page
    for name in ("stress", "disp"):
        png = client.get(f"/campaigns/{campaign}/plots/posterior.png?output={name}")
        assert png.status_code == 200 and png.content[:4] == b"\x89PNG"
    assert client.get(f"/campaigns/{campaign}/plots/accuracy.png").status_code == 200
    history = client.get(f"/campaigns/{campaign}/history").json()
    assert any(e["event"] == "evaluate" and "outputs" in e for e in history)
    assert client.get(f"/campaigns/{campaign}/plots/curve.png").status_code == 200


def test_imports_with_outputs(client, make_body):
    campaign = client.post("/campaigns", json=_body(make_body)).json()["id"]
    url = f"/campaigns/{campaign}/observations"
    xs = [[0.0, 1, "steel"], [0.5, 3, "alu"], [1.0, 5, "steel"]]
    r = client.post(url, json={"x": xs, "y": [1.0, 2.0, 3.0]})
    assert r.status_code == 422 and "y[0]" in r.json()["detail"]
    r = client.post(url, json={"x": xs, "y": [simulate(x) for x in xs[:2]] + [{"stress": 1.0}]})
    assert r.status_code == 422 and "y[2]: output 'disp' is missing" in r.json()["detail"]
    r = client.post(url, json={"x": xs, "y": {"stress": [1.0, 2.0], "disp": [1.0, 2.0, 3.0]}})
    assert r.status_code == 422
    r = client.post(url, json={"x": xs, "y": [simulate(x) for x in xs]})
    assert r.status_code == 201, r.text
    assert client.get(url).json()["y"] == [simulate(x) for x in xs]
    single = client.post("/campaigns", json=make_body()).json()["id"]
    r = client.post(f"/campaigns/{single}/observations", json={"x": [[1.0]], "y": [{"a": 1.0}]})
    assert r.status_code == 422 and "one output" in r.json()["detail"]
    tickets = client.get(f"/campaigns/{single}/next").json()["ticket"]
    r = client.post(f"/campaigns/{single}/label", json={"ticket": tickets, "y": {"a": 1.0}})
    assert r.status_code == 422 and "one output" in r.json()["detail"]


def test_known_noise_with_outputs(client, make_body):
    body = _body(
        make_body,
        noise={"type": "known"},
        inputs=[INPUTS[0]],
        pool={"type": "grid", "points_per_dim": 21},
    )
    campaign = client.post("/campaigns", json=body).json()["id"]
    url = f"/campaigns/{campaign}/label"
    ticket = client.get(f"/campaigns/{campaign}/next").json()["ticket"]
    r = client.post(
        url, json={"ticket": ticket, "y": {"stress": 1.0, "disp": 2.0}, "noise": {"stress": 0.1}}
    )
    assert r.status_code == 422 and "noise: output 'disp' is missing" in r.json()["detail"]
    r = client.post(
        url,
        json={"ticket": ticket, "y_replicates": {"stress": [1.0, 2.0], "disp": [0.0, 0.5, 1.0]}},
    )
    assert r.status_code == 201, r.text
    assert r.json()["y"] == {"stress": 1.5, "disp": 0.5}
    assert r.json()["noise"] == {"stress": pytest.approx(0.25), "disp": pytest.approx(0.25 / 3)}
    for k, x in enumerate((0.3, 0.9)):
        r = client.post(
            f"/campaigns/{campaign}/observations",
            json={
                "x": [[x]],
                "y": [{"stress": k, "disp": 2.0 * x}],
                "noise": [{"stress": 0.01, "disp": 0.0}],
            },
        )
        assert r.status_code == 201, r.text
    wait_for_model(client, campaign, 3)
    rows = observations_csv(client, campaign)
    assert rows[0] == ["x", "y_stress", "y_disp", "noise_stress", "noise_disp", "status", "reason"]
    document = client.get(f"/campaigns/{campaign}/model/export").json()
    assert document["data"]["noise"][1] == {"stress": 0.01, "disp": 0.0}
    p = client.post(f"/campaigns/{campaign}/predict", json={"x": [[0.5]]}).json()
    home = Metamodel.load(document).predict([[0.5]])
    np.testing.assert_allclose(
        home["disp"]["variance"], p["outputs"]["disp"]["variance"], rtol=1e-10
    )
    page = client.get(f"/campaigns/{campaign}/view").text  # one input: each output's model
    assert "id='plot-model-stress'" in page and "id='plot-model-disp'" in page
    for name in ("stress", "disp"):
        png = client.get(f"/campaigns/{campaign}/plots/model.png?output={name}")
        assert png.status_code == 200 and png.content[:4] == b"\x89PNG"


def test_each_output_is_its_single_output_campaign(client, make_body):
    """Output k of a campaign with seed s has the posterior of a single-output campaign with
    seed s + k on the same labels: the same draws and mode, exactly."""
    xs = [[0.1, 1, "steel"], [0.4, 2, "alu"], [0.8, 4, "steel"], [0.9, 5, "alu"]]
    ys = [simulate(x) for x in xs]
    multi = client.post("/campaigns", json=_body(make_body)).json()["id"]
    assert (
        client.post(f"/campaigns/{multi}/observations", json={"x": xs, "y": ys}).status_code == 201
    )
    wait_for_model(client, multi, 4)
    model = client.get(f"/campaigns/{multi}/model").json()
    for k, name in enumerate(("stress", "disp")):
        body = make_body(
            inputs=INPUTS,
            pool={"type": "grid", "points_per_dim": 9},
            max_labels=6,
            mcmc=MCMC,
            seed=5 + k,
        )
        single = client.post("/campaigns", json=body).json()["id"]
        r = client.post(
            f"/campaigns/{single}/observations", json={"x": xs, "y": [y[name] for y in ys]}
        )
        assert r.status_code == 201, r.text
        wait_for_model(client, single, 4)
        alone = client.get(f"/campaigns/{single}/model").json()
        mine = model["outputs"][name]
        for key in ("samples", "acquisition_samples", "mode", "adaptation"):
            assert mine[key] == alone[key], (name, key)
        assert mine["transform"] == {
            "y_mean": alone["transform"]["y_mean"],
            "y_std": alone["transform"]["y_std"],
        }
        assert mine["diagnostics"]["seed"] == alone["diagnostics"]["seed"]
        for key in ("loo_rmse", "ipv", "qbc"):  # the same pool points: the campaign's seed's
            if k == 0:
                assert mine["accuracy"][key] == alone["accuracy"][key]


def test_a_stopping_rule_is_met_when_every_output_meets_it(client, make_body):
    """The model's accuracy is each target's worst over the outputs: the campaign stops on it."""
    xs = [[0.1, 1, "steel"], [0.4, 2, "alu"], [0.8, 4, "steel"]]
    stop = {"loo_rmse_relative": 100.0, "min_labels": 3, "patience": 1}
    campaign = client.post("/campaigns", json=_body(make_body, stop=stop)).json()["id"]
    r = client.post(
        f"/campaigns/{campaign}/observations", json={"x": xs, "y": [simulate(x) for x in xs]}
    )
    assert r.status_code == 201, r.text
    status = wait_for_model(client, campaign, 3)
    model = client.get(f"/campaigns/{campaign}/model").json()
    worst = max(o["accuracy"]["loo_rmse_relative"] for o in model["outputs"].values())
    assert status["state"] == "done" and status["stopped_by"]["value"] == worst
    assert client.get(f"/campaigns/{campaign}/next").status_code == 410


def test_the_limits_count_every_outputs_work(client, make_body):
    mcmc = {"chains": 8, "warmup": 2000, "samples": 2000, "thinning": 10}  # 32,000 iterations
    assert client.post("/campaigns", json=make_body(mcmc=mcmc)).status_code == 201
    r = client.post("/campaigns", json=make_body(mcmc=mcmc, outputs=OUTPUTS))
    assert r.status_code == 422 and "x 2 outputs" in r.json()["detail"]


def test_a_parallel_campaign_of_several_outputs_hands_out_a_batch(client, make_body):
    xs = [[0.1, 1, "steel"], [0.4, 2, "alu"], [0.8, 4, "steel"]]
    body = _body(make_body, mode="parallel", max_pending=3)
    campaign = client.post("/campaigns", json=body).json()["id"]
    r = client.post(
        f"/campaigns/{campaign}/observations", json={"x": xs, "y": [simulate(x) for x in xs]}
    )
    assert r.status_code == 201, r.text
    wait_for_model(client, campaign, 3)
    points = [client.get(f"/campaigns/{campaign}/next").json() for _ in range(3)]
    assert all(p["model_version"] == 3 for p in points)
    assert len({json.dumps(p["x"]) for p in points}) == 3  # three distinct points at once
    assert client.get(f"/campaigns/{campaign}/next").status_code == 202  # max_pending out
    for p in points:
        label = {"ticket": p["ticket"], "y": simulate(p["x"])}
        assert client.post(f"/campaigns/{campaign}/label", json=label).status_code in (201, 410)
    wait_for_model(client, campaign, 6)


KNOWN = {"type": "known", "nugget": True}


def _ticket(client, campaign):
    r = client.get(f"/campaigns/{campaign}/next")
    assert r.status_code == 200, r.text
    return r.json()["ticket"]


def _detail(r):
    return r.json()["detail"]


def test_a_campaign_with_known_noise_end_to_end(client, make_body):
    created = client.post("/campaigns", json=make_body(noise={"type": "known"}, max_labels=8))
    assert created.status_code == 201, created.text
    assert created.json()["noise"] == KNOWN  # nugget: true by default
    campaign = created.json()["id"]
    url = f"/campaigns/{campaign}/label"

    first = _ticket(client, campaign)
    missing = client.post(url, json={"ticket": first, "y": 1.0})
    assert missing.status_code == 422 and "noise is required" in _detail(missing)
    for bad in (
        {"y": 1.0, "noise": -0.1},
        {"y": 1.0, "noise": "NaN"},
        {"y": 1.0, "noise": 1e301},
        {"y_replicates": [1.0]},
        {"y": 1.0, "y_replicates": [1.0, 2.0]},
        {"y_replicates": [1.0, 2.0], "noise": 0.1},
        {"noise": 0.1},
    ):
        r = client.post(url, json={"ticket": first, **bad})
        assert r.status_code == 422, (bad, r.text)
    stored = client.post(url, json={"ticket": first, "y": 1.0, "noise": 0.25})
    assert stored.status_code == 201 and stored.json() == {
        "ticket": first,
        "y": 1.0,
        "noise": 0.25,
        "n_labeled": 1,
    }
    # the same label again is 200; another noise (or y) for it is 409
    assert client.post(url, json={"ticket": first, "y": 1.0, "noise": 0.25}).status_code == 200
    assert client.post(url, json={"ticket": first, "y": 1.0, "noise": 0.5}).status_code == 409
    assert client.post(url, json={"ticket": first, "y": 1.5, "noise": 0.25}).status_code == 409

    second = _ticket(client, campaign)
    runs = [0.3, -0.2, 0.5, 0.1]
    r = client.post(url, json={"ticket": second, "y_replicates": runs})
    assert r.status_code == 201, r.text
    mean, var_of_mean = statistics.fmean(runs), statistics.variance(runs) / len(runs)
    assert r.json()["y"] == pytest.approx(mean, rel=1e-15)
    assert r.json()["noise"] == pytest.approx(var_of_mean, rel=1e-14)
    again = client.post(url, json={"ticket": second, "y_replicates": runs})
    assert again.status_code == 200  # the same replicates: the same label
    assert client.post(url, json={"ticket": second, "y_replicates": runs[:3]}).status_code == 409

    third = _ticket(client, campaign)
    assert client.post(url, json={"ticket": third, "y": -0.7, "noise": 0.0}).status_code == 201
    status = wait_for_model(client, campaign, 3)
    assert status["n_labeled"] == 3

    # a failed run, for the export's failure row
    failed = {"ticket": _ticket(client, campaign), "reason": "=boom"}
    assert client.post(f"/campaigns/{campaign}/fail", json=failed).status_code == 201

    # imports carry their noise; without it (or with one too few) they are refused
    imports = f"/campaigns/{campaign}/observations"
    r = client.post(imports, json={"x": [[1.0]], "y": [0.2]})
    assert r.status_code == 422 and "noise is required" in _detail(r)
    r = client.post(imports, json={"x": [[1.0], [2.0]], "y": [0.2, 0.4], "noise": [0.1]})
    assert r.status_code == 422 and "noise" in _detail(r)
    r = client.post(imports, json={"x": [[1.02], [2.2]], "y": [0.2, 0.4], "noise": [0.1, 0.0]})
    assert r.status_code == 201, r.text
    assert r.json() == {"n_labeled": 5, "imported": 2}

    observed = client.get(imports).json()
    assert observed["y"][0] == 1.0 and observed["y"][2:] == [-0.7, 0.2, 0.4]
    assert observed["y"][1] == pytest.approx(mean, rel=1e-15)
    assert observed["noise"][0] == 0.25 and observed["noise"][2:] == [0.0, 0.1, 0.0]
    assert observed["noise"][1] == pytest.approx(var_of_mean, rel=1e-14)
    table = list(csv.reader(io.StringIO(client.get(imports, headers={"Accept": "text/csv"}).text)))
    assert table[0] == ["x", "y", "noise", "status", "reason"]
    assert table[1][1:] == ["1.0", "0.25", "ok", ""]
    assert [row[2] for row in table[1:6]] == [repr(v) for v in observed["noise"]]
    assert table[6][1:] == ["", "", "failed", "'=boom"]

    # /predict answers; /evaluate adds the test points' noise to their predictive variances
    wait_for_model(client, campaign, 5)
    model = client.get(f"/campaigns/{campaign}/model").json()
    pred = client.post(f"/campaigns/{campaign}/predict", json={"x": [[1.0], [2.0]]}).json()
    assert all(v > 0 for v in pred["variance"])
    test = {"x": [[0.8], [1.7], [2.4]], "y": [0.5, -0.3, 1.1]}
    bare = client.post(f"/campaigns/{campaign}/evaluate", json=test)
    noisy = client.post(f"/campaigns/{campaign}/evaluate", json=dict(test, noise=[0.5, 0.2, 1.0]))
    assert bare.status_code == 200 and noisy.status_code == 200, noisy.text
    spec = dict(created.json(), noise=KNOWN)
    rows = zip(observed["x"], observed["y"], observed["noise"], strict=True)
    labels = [{"x": x, "y": y, "noise": n} for x, y, n in rows]
    expected = answers.metrics(spec, model, labels, test["x"], test["y"], [0.5, 0.2, 1.0])
    assert noisy.json()["model_version"] == model["version"]
    for key in ("nlml", "nlpd_mixture", "rmse"):
        assert noisy.json()[key] == pytest.approx(expected[key], rel=1e-9), key
    assert noisy.json()["nlml"] != pytest.approx(bare.json()["nlml"], rel=1e-3)
    short = client.post(f"/campaigns/{campaign}/evaluate", json=dict(test, noise=[0.5]))
    assert short.status_code == 422


@pytest.mark.parametrize(
    "noise",
    [
        {"type": "known", "nugget": False},
        {"type": "other"},
        {"type": "known", "nugget": True, "extra": 1},
    ],
)
def test_unsupported_noise_settings_are_422(client, make_body, noise):
    r = client.post("/campaigns", json=make_body(noise=noise))
    assert r.status_code == 422, r.text
    assert "noise" in str(r.json()["errors"][0]["loc"])
    if noise.get("nugget") is False:
        assert "nugget: false is not supported" in _detail(r)
