"""A campaign's inputs (:mod:`service.schemas.inputs`) over the real stack: int, log and choice
inputs from the campaign body to the model, /next, /label, /predict, the observations (JSON and
CSV) and the page; a 422 for every input that does not fit, and for inputs whose values cannot
be told apart; a narrow range that float64 resolves is taken."""

import csv
import io
import math

import numpy as np
import pytest

from fbgp_al.clients.metamodel import Metamodel
from tests.service.conftest import label_design, wait_for_model

# text to quote, text a spreadsheet would run, a number
MATERIALS = ["steel", 'al, "6061"', "=SUM(A1)", 7]
INPUTS = [
    {"name": "load", "lower": 0.0, "upper": 2.0},
    {"name": "mesh", "type": "int", "lower": 1, "upper": 6},
    {"name": "rate", "type": "log", "lower": 1e-6, "upper": 1e-1},
    {"name": "material", "type": "choice", "values": MATERIALS},
]
MCMC = {"chains": 2, "warmup": 30, "samples": 30, "thinning": 2}


def simulate(x) -> float:
    load, mesh, rate, material = x
    return load**2 + 0.3 * mesh + 0.5 * math.log10(rate) + 0.8 * MATERIALS.index(material)


def _check_point(x) -> None:
    assert len(x) == 4
    assert isinstance(x[0], float) and 0 <= x[0] <= 2
    assert type(x[1]) is int and 1 <= x[1] <= 6
    assert isinstance(x[2], float) and 1e-6 <= x[2] <= 1e-1
    assert x[3] in MATERIALS and type(x[3]) is type(MATERIALS[MATERIALS.index(x[3])])


def _label(client, campaign: str, count: int) -> list:
    points = []
    for _ in range(count):
        point = client.get(f"/campaigns/{campaign}/next", params={"wait": 60}).json()
        _check_point(point["x"])
        r = client.post(
            f"/campaigns/{campaign}/label",
            json={"ticket": point["ticket"], "y": simulate(point["x"])},
        )
        assert r.status_code == 201, r.text
        points.append(point["x"])
    return points


def test_a_campaign_of_every_input_type(client, make_body):
    body = make_body(
        inputs=INPUTS,
        pool={"type": "grid", "points_per_dim": 5},
        max_labels=8,
        initial_design={"size": 5},
        mcmc=MCMC,
    )
    r = client.post("/campaigns", json=body)
    assert r.status_code == 201, r.text
    created = r.json()
    campaign = created["id"]
    # the inputs as declared: an int's bounds integers, a choice's values as they were
    assert created["inputs"] == INPUTS and created["status"]["inputs"] == INPUTS
    assert client.get(f"/campaigns/{campaign}").json()["inputs"] == INPUTS
    design = _label(client, campaign, 5)
    assert len({tuple(x) for x in design}) == 5
    wait_for_model(client, campaign, 5)

    model = client.get(f"/campaigns/{campaign}/model").json()
    features = ["load", "mesh", "rate"] + [f"material={v}" for v in MATERIALS]
    assert model["features"] == features
    assert all(len(row) == 7 for row in model["samples"]["lengthscale"])
    assert len(model["mode"]["lengthscale"]) == 7
    assert model["transform"]["inputs"] == INPUTS
    assert model["transform"]["lower"] == [0.0, 1.0, 1e-6, 0.0]

    # a model's choice: a grid point, as values
    chosen = _label(client, campaign, 1)[0]
    assert chosen not in design
    wait_for_model(client, campaign, 6)

    # predictions at typed points: an int given as 3.0 is the integer 3; a choice's number
    # given as 7.0 is the value 7; the same point spelled both ways predicts the same
    x = [
        [0.5, 3, 1e-3, "steel"],
        [0.5, 3.0, 1e-3, "steel"],
        [1.5, 6, 1e-6, 7.0],
        [1.5, 6, 1e-6, "=SUM(A1)"],
    ]
    pred = client.post(f"/campaigns/{campaign}/predict", json={"x": x})
    assert pred.status_code == 200, pred.text
    mean = pred.json()["mean"]
    assert len(mean) == 4 and mean[0] == mean[1] and mean[2] != mean[3]
    assert all(math.isfinite(v) for v in pred.json()["variance"])
    # taken home: the exported model maps the typed points as the service does
    document = client.get(f"/campaigns/{campaign}/model/export").json()
    taken = Metamodel.load(document)
    assert taken.version == 6 and document["data"]["x"][5] == chosen
    scale = document["transform"]["y_std"] ** 2
    for key, values in taken.predict(x).items():
        np.testing.assert_allclose(values, pred.json()[key], rtol=1e-10, atol=1e-10 * scale)
    with pytest.raises(ValueError, match="material"):
        taken.predict([[0.5, 3, 1e-3, "wood"]])
    # beyond the bounds the model extrapolates, as for float inputs; a log value stays positive
    far = taken.predict([[2.5, 8, 1.0, "steel"], [-1.0, 0, 1e-9, 7]])
    assert all(np.isfinite(v).all() for v in far.values())
    with pytest.raises(ValueError, match="rate = 0.0 is not positive"):
        taken.predict([[0.5, 3, 0.0, "steel"]])
    acq = client.post(f"/campaigns/{campaign}/acquisition", json={"x": x[:2]})
    assert acq.status_code == 200 and len(acq.json()["values"]) == 2
    ev = client.post(f"/campaigns/{campaign}/evaluate", json={"x": x, "y": [1.0, 1.0, 2.0, 3.0]})
    assert ev.status_code == 200 and math.isfinite(ev.json()["rmse"])

    # an import off the grid is kept with its values
    imported = [0.123, 4, 2.5e-4, 'al, "6061"']
    r = client.post(
        f"/campaigns/{campaign}/observations",
        json={"x": [[0.123, 4.0, 2.5e-4, 'al, "6061"']], "y": [1.25]},
    )
    assert r.status_code == 201, r.text

    obs = client.get(f"/campaigns/{campaign}/observations").json()
    assert obs["x"][:5] == design and obs["x"][5] == chosen and obs["x"][6] == imported
    assert type(obs["x"][6][1]) is int
    text = client.get(f"/campaigns/{campaign}/observations", headers={"Accept": "text/csv"}).text
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["load", "mesh", "rate", "material", "y", "status", "reason"]
    assert rows[7][:4] == ["0.123", "4", "0.00025", 'al, "6061"'] and rows[7][4:6] == ["1.25", "ok"]
    cells = {row[3] for row in rows[1:]}
    assert "=SUM(A1)" not in cells  # a spreadsheet formula is never written as one
    for row, x in zip(rows[1:], obs["x"], strict=True):
        value = x[3]
        expected = "'" + value if value == "=SUM(A1)" else str(value)
        assert row[3] == expected and int(row[1]) == x[1] and float(row[2]) == x[2]

    # the page: the posterior by feature, no model plot over a choice input
    view = client.get(f"/campaigns/{campaign}/view")
    assert view.status_code == 200
    assert "plot-posterior" in view.text and "plot-model" not in view.text
    png = client.get(f"/campaigns/{campaign}/plots/posterior.png")
    assert png.status_code == 200 and png.content.startswith(b"\x89PNG")
    assert client.get(f"/campaigns/{campaign}/plots/model.png").status_code == 404


def test_two_numeric_typed_inputs_are_drawn_on_the_page(client, make_body):
    inputs = [
        {"name": "n", "type": "int", "lower": 0, "upper": 4},
        {"name": "rate", "type": "log", "lower": 1e-3, "upper": 10.0},
    ]
    body = make_body(inputs=inputs, pool={"type": "grid", "points_per_dim": 20}, mcmc=MCMC)
    campaign = client.post("/campaigns", json=body).json()["id"]
    assert client.get(f"/campaigns/{campaign}").json()["inputs"] == inputs
    label_design(client, campaign, (0.1, 0.9, -0.4))
    wait_for_model(client, campaign, 3)
    model = client.get(f"/campaigns/{campaign}/model").json()
    assert model["features"] == ["n", "rate"] and len(model["mode"]["lengthscale"]) == 2
    # the grid: 5 integers x 20 rates, no point twice
    offered = client.get(f"/campaigns/{campaign}/next", params={"wait": 60}).json()["x"]
    assert type(offered[0]) is int and 0 <= offered[0] <= 4
    assert "plot-model" in client.get(f"/campaigns/{campaign}/view").text
    png = client.get(f"/campaigns/{campaign}/plots/model.png")
    assert png.status_code == 200 and png.content.startswith(b"\x89PNG")


def test_a_pool_of_typed_points_hands_them_out_as_posted(client, make_body):
    inputs = [
        {"name": "solver", "type": "choice", "values": ["cg", "gmres", "direct"]},
        {"name": "levels", "type": "int", "lower": 1, "upper": 5},
    ]
    points = [["cg", 1], ["gmres", 2.0], ["direct", 5], ["cg", 3], ["gmres", 4]]
    body = make_body(inputs=inputs, pool={"type": "points", "points": points}, max_labels=5)
    r = client.post("/campaigns", json=body)
    assert r.status_code == 201, r.text
    campaign = r.json()["id"]
    canonical = [["cg", 1], ["gmres", 2], ["direct", 5], ["cg", 3], ["gmres", 4]]
    assert r.json()["pool"]["points"] == canonical and type(r.json()["pool"]["points"][1][1]) is int
    offered = []
    for _ in range(3):
        point = client.get(f"/campaigns/{campaign}/next").json()
        assert point["x"] in canonical and type(point["x"][1]) is int
        offered.append(point)
    client.post(f"/campaigns/{campaign}/label", json={"ticket": offered[0]["ticket"], "y": 1.0})
    fail = client.post(
        f"/campaigns/{campaign}/fail", json={"ticket": offered[1]["ticket"], "reason": "diverged"}
    )
    assert fail.status_code == 201
    obs = client.get(f"/campaigns/{campaign}/observations").json()
    assert obs["x"] == [offered[0]["x"]] and obs["failures"][0]["x"] == offered[1]["x"]
    text = client.get(f"/campaigns/{campaign}/observations", headers={"Accept": "text/csv"}).text
    failed = list(csv.reader(io.StringIO(text)))[-1]
    assert failed == [offered[1]["x"][0], str(offered[1]["x"][1]), "", "failed", "diverged"]
    view = client.get(f"/campaigns/{campaign}/view").text
    assert f"solver={offered[1]['x'][0]}, levels={offered[1]['x'][1]}" in view
    # a point of the pool imported by its values is that pool point: labeled once only
    rest = [p for p in canonical if p not in (o["x"] for o in offered)]
    r = client.post(f"/campaigns/{campaign}/observations", json={"x": [rest[0]] * 2, "y": [1, 2]})
    assert r.status_code == 409


BAD_INPUTS = {
    "int with fractional bounds": {"name": "n", "type": "int", "lower": 0.5, "upper": 4},
    "log with a zero lower bound": {"name": "r", "type": "log", "lower": 0, "upper": 1},
    "log with a negative lower bound": {"name": "r", "type": "log", "lower": -1, "upper": 1},
    "choice with bounds": {"name": "c", "type": "choice", "values": ["a", "b"], "lower": 0},
    "choice without values": {"name": "c", "type": "choice"},
    "choice with one value": {"name": "c", "type": "choice", "values": ["a"]},
    "choice with repeated values": {"name": "c", "type": "choice", "values": ["a", "b", "a"]},
    "choice with a number twice": {"name": "c", "type": "choice", "values": [1, 1.0]},
    "choice with a boolean": {"name": "c", "type": "choice", "values": [True, False]},
    "choice with a null": {"name": "c", "type": "choice", "values": ["a", None]},
    "values for a float": {"name": "x", "lower": 0, "upper": 1, "values": [0, 1]},
    "float without bounds": {"name": "x", "type": "float"},
    "int without upper": {"name": "n", "type": "int", "lower": 0},
    "unknown type": {"name": "x", "type": "complex", "lower": 0, "upper": 1},
    "int beyond 2^53": {"name": "n", "type": "int", "lower": 0, "upper": 2**60},
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_specs_are_422_naming_the_input(client, make_body, case):
    spec = BAD_INPUTS[case]
    r = client.post("/campaigns", json=make_body(inputs=[spec]))
    assert r.status_code == 422, r.text
    assert r.json()["detail"]


def test_typed_pool_points_that_do_not_fit_are_422(client, make_body):
    inputs = [
        {"name": "c", "type": "choice", "values": ["a", "b"]},
        {"name": "n", "type": "int", "lower": 0, "upper": 3},
    ]
    for points, message in [
        ([["a", 1], ["b", 1.5], ["a", 2]], "pool point 1: n = 1.5 is not an integer"),
        ([["a", 1], ["z", 1], ["a", 2]], "pool point 1: c = 'z' is not one of its values"),
        ([["a", 1], [0, 1], ["a", 2]], "pool point 1: c = 0 is not one of its values"),
        ([["a", 1], ["a", 1.0], ["a", 2]], "distinct"),
    ]:
        pool = {"type": "points", "points": points}
        r = client.post("/campaigns", json=make_body(inputs=inputs, max_labels=3, pool=pool))
        assert r.status_code == 422, r.text
        assert message in r.text, r.text


def test_points_that_do_not_fit_typed_inputs_are_422(client, make_body):
    body = make_body(inputs=INPUTS, pool={"type": "grid", "points_per_dim": 5})
    campaign = client.post("/campaigns", json=body).json()["id"]
    good = [1.0, 2, 1e-3, "steel"]
    for x, message in [
        ([1.0, 2.5, 1e-3, "steel"], "mesh = 2.5 is not an integer"),
        ([1.0, 7, 1e-3, "steel"], "mesh = 7 is outside [1, 6]"),
        ([1.0, 2, 0.0, "steel"], "rate = 0.0 is outside"),
        ([1.0, 2, 1.0, "steel"], "rate = 1.0 is outside"),
        ([1.0, 2, 1e-3, "wood"], "material = 'wood' is not one of its values"),
        ([1.0, 2, 1e-3, "7"], "material = '7' is not one of its values"),
        (["1.0", 2, 1e-3, "steel"], "load = '1.0' is not a number"),
        ([10**400, 2, 1e-3, "steel"], "is not a finite number"),
        ([1.0, 2, 1e-3], "has 3 coordinates"),
    ]:
        r = client.post(f"/campaigns/{campaign}/observations", json={"x": [good, x], "y": [1, 2]})
        assert r.status_code == 422 and "point 1" in r.text and message in r.text, (x, r.text)
    assert client.get(f"/campaigns/{campaign}").json()["n_labeled"] == 0  # none was stored
    r = client.post(
        f"/campaigns/{campaign}/observations", json={"x": [[1.0, 2, 1e-3, True]], "y": [1]}
    )
    assert r.status_code == 422


def test_strings_for_plain_float_inputs_are_422(client, make_body):
    campaign = client.post("/campaigns", json=make_body()).json()["id"]
    for path, extra in (("observations", {"y": [1.0]}), ("predict", {}), ("acquisition", {})):
        r = client.post(f"/campaigns/{campaign}/{path}", json={"x": [["1.0"]], **extra})
        assert r.status_code == 422 and "x = '1.0' is not a number" in r.text, r.text
    pool = {"type": "points", "points": [[1.0], ["2"], [2.2]]}
    r = client.post("/campaigns", json=make_body(pool=pool))
    assert r.status_code == 422 and "pool point 1" in r.text


def test_a_grid_too_large_counts_each_inputs_levels(client, make_body):
    inputs = [{"name": f"x{j}", "lower": 0, "upper": 1} for j in range(9)]
    inputs.append({"name": "n", "type": "int", "lower": 0, "upper": 1})
    grid = {"type": "grid", "points_per_dim": 100}
    # 100^9 x 2 points (the int's 2 levels) fit in 2^62 indices; 100^10 would not
    r = client.post("/campaigns", json=make_body(inputs=inputs, pool=grid))
    assert r.status_code == 201, r.text
    inputs.append({"name": "m", "type": "int", "lower": 0, "upper": 10**6})
    r = client.post("/campaigns", json=make_body(inputs=inputs, pool=grid))
    assert r.status_code == 422 and "100 x 100" in r.text


UNREADABLE = {
    "a float range too narrow for float64": (
        [{"name": "x", "lower": 1.0, "upper": 1.0000000000000002}],
        "upper - lower must exceed",
    ),
    "a range of subnormal floats": (
        [{"name": "x", "lower": 5e-324, "upper": 1e-323}],
        "too narrow",
    ),
    "a log range too narrow for float64": (
        [{"name": "r", "type": "log", "lower": 1e10, "upper": 10000000000.000002}],
        "log(upper) - log(lower) must exceed",
    ),
    "choice values that read the same as text": (
        [{"name": "c", "type": "choice", "values": [10, "10", 2]}],
        "10 and '10' read the same",
    ),
    "features that read the same": (
        [
            {"name": "m=steel", "lower": 0, "upper": 1},
            {"name": "m", "type": "choice", "values": ["steel", "al"]},
        ],
        "read 'm=steel'",
    ),
}


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
    inputs = [
        {"name": "x", "lower": 1.0, "upper": 1.000001},
        {"name": "r", "type": "log", "lower": 1e-9, "upper": 1.000001e-9},
    ]
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
