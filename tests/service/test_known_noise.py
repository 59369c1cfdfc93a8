"""Known noise over the API, on the real stack: a campaign whose labels carry their noise
variances (``noise`` or ``y_replicates``), the 422s for the wrong combination, idempotency on y
and noise, imports, exports (JSON and CSV) and ``/evaluate`` with the test points' noise."""

import csv
import io
import statistics

import pytest

from tests.service.conftest import wait_for_model
from worker import answers

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
    for bad in ({"y": 1.0, "noise": -0.1}, {"y": 1.0, "noise": "NaN"}, {"y": 1.0, "noise": 1e301},
                {"y_replicates": [1.0]}, {"y": 1.0, "y_replicates": [1.0, 2.0]},
                {"y_replicates": [1.0, 2.0], "noise": 0.1}, {"noise": 0.1}):  # fmt: skip
        r = client.post(url, json={"ticket": first, **bad})
        assert r.status_code == 422, (bad, r.text)
    stored = client.post(url, json={"ticket": first, "y": 1.0, "noise": 0.25})
    assert stored.status_code == 201 and stored.json() == {
        "ticket": first, "y": 1.0, "noise": 0.25, "n_labeled": 1}  # fmt: skip
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


def test_a_learned_noise_campaign_refuses_noise_and_keeps_its_bodies(client, make_body):
    created = client.post("/campaigns", json=make_body())
    assert "noise" not in created.json()  # the default, written as before the option existed
    explicit = client.post("/campaigns", json=make_body(noise={"type": "learned"}))
    assert explicit.status_code == 201 and "noise" not in explicit.json()
    campaign = created.json()["id"]
    url = f"/campaigns/{campaign}/label"
    ticket = _ticket(client, campaign)
    for body in ({"y": 1.0, "noise": 0.1}, {"y_replicates": [1.0, 1.2]}):
        r = client.post(url, json={"ticket": ticket, **body})
        assert r.status_code == 422, r.text
        assert '"noise": {"type": "known"}' in _detail(r)
    ok = client.post(url, json={"ticket": ticket, "y": 1.0})
    assert ok.status_code == 201 and ok.json() == {"ticket": ticket, "y": 1.0, "n_labeled": 1}
    imports = f"/campaigns/{campaign}/observations"
    r = client.post(imports, json={"x": [[1.0]], "y": [0.2], "noise": [0.1]})
    assert r.status_code == 422 and '"noise": {"type": "known"}' in _detail(r)
    r = client.post(f"/campaigns/{campaign}/evaluate",
                    json={"x": [[1.0]], "y": [0.2], "noise": [0.1]})  # fmt: skip
    assert r.status_code == 422 and "noise" in _detail(r)
    observed = client.get(imports).json()
    assert set(observed) == {"x", "y", "failures"} and observed["y"] == [1.0]
    header = client.get(imports, headers={"Accept": "text/csv"}).text.splitlines()[0]
    assert header == '"x","y","status","reason"'


@pytest.mark.parametrize("noise", [{"type": "known", "nugget": False}, {"type": "other"},
                                   {"type": "known", "nugget": True, "extra": 1}])  # fmt: skip
def test_unsupported_noise_settings_are_422(client, make_body, noise):
    r = client.post("/campaigns", json=make_body(noise=noise))
    assert r.status_code == 422, r.text
    assert "noise" in str(r.json()["errors"][0]["loc"])
    if noise.get("nugget") is False:
        assert "nugget: false is not supported" in _detail(r)
