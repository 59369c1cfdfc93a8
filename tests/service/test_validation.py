"""Every bad input gets a clear 4xx, never a 500."""

import math

import pytest

from service.settings import Settings, get_settings
from tests.service.conftest import label_design, wait_for_model

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


UNREADABLE = {
    "a float range too narrow for float64": (
        [{"name": "x", "lower": 1.0, "upper": 1.0000000000000002}], "upper - lower must exceed"),
    "a range of subnormal floats": (
        [{"name": "x", "lower": 5e-324, "upper": 1e-323}], "too narrow"),
    "a log range too narrow for float64": (
        [{"name": "r", "type": "log", "lower": 1e10, "upper": 10000000000.000002}],
        "log(upper) - log(lower) must exceed"),
    "choice values that read the same as text": (
        [{"name": "c", "type": "choice", "values": [10, "10", 2]}], "10 and '10' read the same"),
    "features that read the same": (
        [{"name": "m=steel", "lower": 0, "upper": 1},
         {"name": "m", "type": "choice", "values": ["steel", "al"]}], "read 'm=steel'"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(UNREADABLE))
def test_inputs_whose_values_cannot_be_told_apart_are_422(client, make_body, case):
    """Inputs the GP, the CSV export or the model's features could not tell apart: before,
    a log range of equal logarithms made every prediction NaN, and a choice of 10 and "10"
    wrote both as 10."""
    inputs, message = UNREADABLE[case]
    r = client.post(
        "/campaigns", json=make_body(inputs=inputs, pool={"type": "grid", "points_per_dim": 5})
    )
    assert r.status_code == 422 and message in r.json()["detail"], r.text


def test_a_narrow_range_that_float64_resolves_is_taken(client, make_body):
    inputs = [{"name": "x", "lower": 1.0, "upper": 1.000001},
              {"name": "r", "type": "log", "lower": 1e-9, "upper": 1.000001e-9}]  # fmt: skip
    r = client.post(
        "/campaigns", json=make_body(inputs=inputs, pool={"type": "grid", "points_per_dim": 11})
    )
    assert r.status_code == 201, r.text
    points = {tuple(client.get(f"/campaigns/{r.json()['id']}/next").json()["x"]) for _ in "abc"}
    assert len(points) == 3 and all(1.0 <= x <= 1.000001 for x, _ in points)


@pytest.mark.parametrize("raw", ["NaN", "Infinity"])
def test_non_finite_bounds_are_422(client, make_body, raw):
    body = make_body()
    text = (
        str(body)
        .replace("'", '"')
        .replace("2.5", raw)
        .replace("True", "true")
        .replace("False", "false")
    )
    r = client.post("/campaigns", content=text, headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text


def test_bad_points_for_model_calls_and_imports(client, make_body):
    campaign = client.post("/campaigns", json=make_body()).json()["id"]
    for path in ("predict", "acquisition"):
        assert client.post(f"/campaigns/{campaign}/{path}", json={"x": [[9.0]]}).status_code == 422
        assert (
            client.post(f"/campaigns/{campaign}/{path}", json={"x": [[1.0, 1.0]]}).status_code
            == 422
        )
        assert client.post(f"/campaigns/{campaign}/{path}", json={"x": []}).status_code == 422
    url = f"/campaigns/{campaign}/observations"
    assert client.post(url, json={"x": [[3.0]], "y": [1.0]}).status_code == 422
    assert client.post(url, json={"x": [[1.0]], "y": [1.0, 2.0]}).status_code == 422
    r = client.post(
        url, content='{"x": [[1.0]], "y": [NaN]}', headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 422
    bad_acq = client.post(
        f"/campaigns/{campaign}/acquisition", json={"x": [[1.0]], "acquisition": "x"}
    )
    assert bad_acq.status_code == 422
    assert client.get(f"/campaigns/{campaign}/next", params={"wait": -1}).status_code == 422
    assert client.get("/campaigns/nope/next").status_code == 404
    assert (
        client.post(
            "/campaigns", content="{not json", headers={"Content-Type": "application/json"}
        ).status_code
        == 422
    )


def test_token_is_required_when_configured(client, settings, make_body):
    from service.app import app

    app.dependency_overrides[get_settings] = lambda: Settings(
        redis_url=settings.redis_url, api_token="s3cret"
    )
    assert client.get("/campaigns").status_code == 401
    assert client.get("/campaigns", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/campaigns", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert client.get("/healthz").status_code == 200  # liveness needs no token


def test_health_and_readiness(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["workers"] >= 1


def test_outputs_are_numbers_within_a_range_the_gp_can_scale(client, make_body):
    """A label or an imported y that is a string, a boolean, or beyond +-1e150 (whose squared
    scale would overflow float64, and make a model with infinite variances) is a 422 that says
    why; the campaign goes on with its valid labels."""
    campaign = client.post("/campaigns", json=make_body()).json()["id"]
    tickets = [client.get(f"/campaigns/{campaign}/next").json()["ticket"] for _ in range(3)]
    for y in ("1.5", True, -1e308, 1e151):
        r = client.post(f"/campaigns/{campaign}/label", json={"ticket": tickets[0], "y": y})
        assert r.status_code == 422, (y, r.text)
        r = client.post(f"/campaigns/{campaign}/observations", json={"x": [[1.0]], "y": [y]})
        assert r.status_code == 422, (y, r.text)
    r = client.post(f"/campaigns/{campaign}/label", json={"ticket": tickets[0], "y": 1e151})
    assert "1e+150" in r.text and "rescale" in r.text
    for ticket, y in zip(tickets, (1.5, -1e150, 0), strict=True):  # the edge itself is fine
        assert client.post(f"/campaigns/{campaign}/label",
                           json={"ticket": ticket, "y": y}).status_code == 201  # fmt: skip
    wait_for_model(client, campaign, 3)
    model = client.get(f"/campaigns/{campaign}/model")
    assert model.status_code == 200, model.text
    p = client.post(f"/campaigns/{campaign}/predict", json={"x": [[1.0], [2.0]]})
    assert p.status_code == 200 and all(math.isfinite(v) for v in p.json()["variance"]), p.text


def test_mcmc_samples_to_a_target_unless_a_count_is_named(client, make_body):
    """No `mcmc`: the defaults, sampling to a target of 150 draws; a campaign that names a count
    (`samples` or `thinning`) and no `draws` samples that count; a cap below the count is 422."""
    body = make_body()
    del body["mcmc"]
    created = client.post("/campaigns", json=body).json()
    default = created["mcmc"]
    assert default["draws"] == 150 and default["target_rhat"] == 1.01
    assert default["metric"] == "diag" and default["max_samples"] == 1000
    assert default["noise_floor"] == 1e-6
    counted = client.post("/campaigns", json=make_body(mcmc={"samples": 40})).json()["mcmc"]
    assert counted["draws"] is None and counted["samples"] == 40
    both = make_body(mcmc={"samples": 40, "draws": 20, "metric": "dense"})
    assert client.post("/campaigns", json=both).json()["mcmc"]["draws"] == 20
    capped = make_body(mcmc={"samples": 400, "draws": 20, "max_samples": 100})
    r = client.post("/campaigns", json=capped)
    assert r.status_code == 422 and "max_samples" in r.text
    # the worker samples the default campaign to its target, and says so
    campaign = created["id"]
    label_design(client, campaign, (0.1, 0.9, -0.4))
    wait_for_model(client, campaign, 3, seconds=120)
    model = client.get(f"/campaigns/{campaign}/model").json()
    assert len(model["acquisition_samples"]["noise"]) == 150
    assert min(model["samples"]["noise"]) >= 1e-6 and model["diagnostics"]["noise_floor"] == 1e-6
    assert "target" in model["diagnostics"], model["diagnostics"]


def test_names_are_stored_in_nfkc_form(client, make_body):
    """Compatibility characters (a ligature, full-width letters) are stored as the letters they
    stand for, so a name reads and matches one way."""
    body = make_body(name="\ufb01ne beam", inputs=[{"name": "\uff4c\uff4f\uff41\uff44", "lower": 0,
                                                    "upper": 1}])  # fmt: skip
    created = client.post("/campaigns", json=body)
    assert created.status_code == 201, created.text
    assert created.json()["name"] == "fine beam"
    assert [i["name"] for i in created.json()["inputs"]] == ["load"]
