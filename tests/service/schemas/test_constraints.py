"""A campaign's known constraints over the real stack (API in process, a worker, Redis): every
point handed out satisfies them through the design and several refits, an explicit pool keeps
only its points inside, imported observations outside are taken (off the pool), every mistake
is a 422 that names the constraint, and a campaign stored without them runs as before."""

import json

import pytest
from redis import Redis

from tests.service.conftest import wait_for_model

MCMC = {"chains": 2, "warmup": 20, "samples": 20}
SQUARE = [{"name": "x", "lower": 0.0, "upper": 1.0}, {"name": "y", "lower": 0.0, "upper": 1.0}]
# the feasible part: the triangle under x + y = 0.8 (a third of the square), where the
# function below is flattest, so that a learner that ignored it would go elsewhere
TRIANGLE = "x + y <= 0.8"


def f(x) -> float:
    return (x[0] + x[1]) ** 3 + 0.3 * x[0]


def inside(x) -> bool:
    return x[0] + x[1] <= 0.8 + 1e-9


def test_no_point_handed_out_leaves_the_constraint_through_several_refits(client, make_body):
    body = make_body(
        inputs=SQUARE,
        pool={"type": "grid", "points_per_dim": 21},
        constraints=[TRIANGLE],
        mode="parallel",
        max_pending=3,
        max_labels=13,
        initial_design={"size": 4},
        mcmc=MCMC,
        seed=2,
    )
    r = client.post("/campaigns", json=body)
    assert r.status_code == 201, r.text
    created = r.json()
    assert created["constraints"] == [TRIANGLE]
    campaign = created["id"]
    handed, versions = [], set()
    while True:
        point = client.get(f"/campaigns/{campaign}/next", params={"wait": 60})
        if point.status_code == 410:
            break
        assert point.status_code == 200, point.text
        point = point.json()
        handed.append(point["x"])
        versions.add(point["model_version"])
        r = client.post(
            f"/campaigns/{campaign}/label", json={"ticket": point["ticket"], "y": f(point["x"])}
        )
        assert r.status_code == 201, r.text
    assert len(handed) == 13 and len({tuple(x) for x in handed}) == 13
    assert len(versions - {None}) >= 3  # points of several models
    outside = [x for x in handed if not inside(x)]
    assert outside == []
    status = wait_for_model(client, campaign, 13)
    assert status["state"] == "done" and status["last_error"] is None


def test_imported_observations_outside_are_taken_off_the_pool(client, make_body):
    body = make_body(
        inputs=SQUARE,
        pool={"type": "grid", "points_per_dim": 11},
        constraints=[TRIANGLE],
        max_labels=8,
        mcmc=MCMC,
    )
    campaign = client.post("/campaigns", json=body).json()["id"]
    x = [[0.9, 0.9], [1.0, 0.5], [0.1, 0.2], [0.3, 0.4]]  # two outside: a simulator's results
    r = client.post(f"/campaigns/{campaign}/observations", json={"x": x, "y": [f(p) for p in x]})
    assert r.status_code == 201 and r.json()["n_labeled"] == 4, r.text
    assert client.get(f"/campaigns/{campaign}/observations").json()["x"] == x
    wait_for_model(client, campaign, 4)
    for _ in range(2):
        point = client.get(f"/campaigns/{campaign}/next", params={"wait": 60}).json()
        assert inside(point["x"]) and point["x"] not in x
        r = client.post(
            f"/campaigns/{campaign}/label", json={"ticket": point["ticket"], "y": f(point["x"])}
        )
        assert r.status_code == 201


def test_an_explicit_pool_keeps_its_points_inside(client, make_body):
    points = [[i / 4, j / 4] for i in range(5) for j in range(5)]
    kept = [p for p in points if inside(p)]
    body = make_body(
        inputs=SQUARE,
        pool={"type": "points", "points": points},
        constraints=[TRIANGLE],
        max_labels=len(kept),
        mcmc=MCMC,
    )
    r = client.post("/campaigns", json=body)
    assert r.status_code == 201, r.text
    assert r.json()["pool"]["points"] == kept  # the answer shows the pool as kept
    campaign = r.json()["id"]
    for _ in range(3):
        point = client.get(f"/campaigns/{campaign}/next").json()
        assert point["x"] in kept
        client.post(
            f"/campaigns/{campaign}/label", json={"ticket": point["ticket"], "y": f(point["x"])}
        )
    # one point more than the kept ones: refused, counting the kept only
    body["max_labels"] = len(kept) + 1
    r = client.post("/campaigns", json=body)
    assert r.status_code == 422
    assert f"exceeds the pool ({len(kept)} points inside the constraints)" in r.json()["detail"]


BEAM = [
    {"name": "load", "lower": 1.0, "upper": 10.0},
    {"name": "thickness", "type": "int", "lower": 2, "upper": 20},
    {"name": "material", "type": "choice", "values": ["steel", "al", "ti"]},
]
GRID = {"type": "grid", "points_per_dim": 30}


@pytest.mark.parametrize(
    "changes, detail",
    [
        (
            {"constraints": ["thickness >= 4 or lod <= 8"]},
            "constraints[0] 'thickness >= 4 or lod <= 8': unknown input 'lod' (the inputs: load, "
            "thickness, material) at character 19",
        ),
        (
            {"constraints": ["load <= 8", "load <= 8 or"]},
            "constraints[1] 'load <= 8 or': expected an input, a number or '(', found the end at "
            "character 13",
        ),
        (
            {"constraints": ["material <= 2"]},
            "constraints[0] 'material <= 2': 'material' is a choice input: it compares only with "
            "its values ('steel', 'al', 'ti') by ==, != or in at character 10",
        ),
        (
            {"constraints": ["material == 1"]},
            "constraints[0] 'material == 1': 1 (a number) is not one of the values of choice input "
            "'material' ('steel', 'al', 'ti') at character 13",
        ),
        (
            {"constraints": ["load >= 'steel'"]},
            "constraints[0] \"load >= 'steel'\": 'steel' is a text: only a choice input compares "
            "with a text, and the other side is a number at character 9",
        ),
        (
            {"constraints": ["load * thickness <= 20"]},
            "constraints[0] 'load * thickness <= 20': not linear: a product of two inputs at "
            "character 6",
        ),
        (
            {"constraints": ["load <= 5", "load > 10"]},
            "constraints[1] 'load > 10' leaves none of the grid's points",
        ),
        (
            {"constraints": ["load <= 5", "load > 6"]},
            "the constraints together leave none of the grid's points (each alone leaves some)",
        ),
        (
            {"constraints": ["load <= 1 and thickness <= 2"]},
            "max_labels (10) exceeds the pool (3 points inside the constraints) and allow_repeats "
            "is false",
        ),
        (
            {
                "constraints": ["load <= 1 and thickness <= 2 and material == 'al'"],
                "allow_repeats": True,
            },
            "the pool (1 points inside the constraints) is smaller than the initial design (3)",
        ),
        (
            {
                "constraints": ["load > 9.5"],
                "pool": {"type": "points", "points": [[1, 2, "al"]]},
                "max_labels": 1,
                "initial_design": {"size": 1},
            },
            "constraints[0] 'load > 9.5' leaves none of the pool's points",
        ),
        (
            {
                "inputs": [{"name": f"x{i}", "lower": 0, "upper": 1} for i in range(6)],
                "pool": {"type": "grid", "points_per_dim": 100},
                "constraints": ["x0 <= 0.01 and x1 <= 0.01 and x2 <= 0.01"],
            },
            "constraints[0] 'x0 <= 0.01 and x1 <= 0.01 and x2 <= 0.01' leaves none of 65,536 of "
            "the grid's points drawn at random (a feasible part under about 1 in 65,536 of the "
            "grid is too small to draw candidates from: narrow the inputs' bounds instead)",
        ),
        (
            {"constraints": [" or ".join(["load<1"] * 60), " or ".join(["load<1"] * 41)]},
            "the constraints hold 101 comparisons up to this one, more than 100 in all",
        ),
        (
            {"constraints": ["(" * 40 + "load <= 1" + ")" * 40]},
            "nested deeper than 32 levels (parentheses, not, signs) at character 33",
        ),
        ({"constraints": [""]}, "constraints.0: String should have at least 1 character"),
        ({"constraints": ["load <= 1"] * 51}, "constraints: List should have at most 50 items"),
        ({"constraints": [3]}, "constraints.0: Input should be a valid string"),
        ({"constraints": "load <= 1"}, "constraints: Input should be a valid list"),
    ],
)
def test_every_mistake_is_a_422_that_names_the_constraint(client, make_body, changes, detail):
    body = make_body(inputs=BEAM, pool=GRID, max_labels=10)
    r = client.post("/campaigns", json=dict(body, **changes))
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert detail in r.json()["detail"]


def test_a_campaign_stored_without_constraints_runs_as_before(client, make_body, settings):
    """The spec of a campaign without constraints is stored as before they existed (no key);
    one stored so, as every campaign of an older store, loads, designs and refits."""
    campaign = client.post("/campaigns", json=make_body(max_labels=5)).json()["id"]
    redis = Redis.from_url(settings.redis_url)
    key = next(k for k in redis.scan_iter(f"fbgp:*{campaign}*spec"))
    assert "constraints" not in json.loads(redis.get(key))
    for _ in range(4):
        point = client.get(f"/campaigns/{campaign}/next", params={"wait": 60}).json()
        r = client.post(
            f"/campaigns/{campaign}/label",
            json={"ticket": point["ticket"], "y": point["x"][0] ** 2},
        )
        assert r.status_code == 201, r.text
    status = wait_for_model(client, campaign, 4)
    assert status["state"] == "active" and status["last_error"] is None
