"""A campaign whose refits polish their best candidates (``search``), over HTTP with the tests'
worker: the points handed out after the design are the box's, not the pool's, each handed out
once, labeled and failed as pool points are, pending in a parallel batch, exported as run; a
bad ``search`` is a 422 that says why."""

import csv
import math

import pytest

from tests.service.conftest import next_ticket, observations_csv

SEARCH = {"polish": True, "starts": 2}


def _label(client, campaign, ticket):
    y = math.sin(3 * ticket["x"][0]) + ticket["x"][0] ** 2
    r = client.post(f"/campaigns/{campaign}/label", json={"ticket": ticket["ticket"], "y": y})
    assert r.status_code == 201, r.text


def _on_grid(x: float, lower=0.5, upper=2.5, levels=11) -> bool:
    step = (upper - lower) / (levels - 1)
    return abs((x - lower) / step - round((x - lower) / step)) < 1e-9


def test_a_polishing_campaign_hands_out_points_of_the_box(client, make_body):
    body = make_body(pool={"type": "grid", "points_per_dim": 11}, max_labels=6, search=SEARCH)
    created = client.post("/campaigns", json=body)
    assert created.status_code == 201, created.text
    assert created.json()["search"] == {"polish": True, "starts": 2}
    campaign = created.json()["id"]
    handed = []
    while (ticket := next_ticket(client, campaign, seconds=120)) is not None:
        handed.append(ticket)
        if len(handed) == 5:  # a failed run: not offered again, the next refit chooses anew
            r = client.post(
                f"/campaigns/{campaign}/fail", json={"ticket": ticket["ticket"], "reason": "x"}
            )
            assert r.status_code == 201
            continue
        _label(client, campaign, ticket)
    xs = [t["x"][0] for t in handed]
    assert all(_on_grid(x) for x in xs[:3])  # the design, on the grid
    assert sum(not _on_grid(x) for x in xs[3:]) >= 2  # polished points, off it (or on a face)
    labeled = [x for k, x in enumerate(xs) if k != 4]
    assert all(0.5 <= x <= 2.5 for x in xs) and len(set(labeled)) == len(labeled)
    model = client.get(f"/campaigns/{campaign}/model").json()
    assert model["diagnostics"]["search"]["polish"]
    rows = observations_csv(client, campaign, csv.DictReader)
    # each point as it was run: the labels', then the failed run's
    assert [float(r["x"]) for r in rows if r["status"] == "ok"] == labeled
    assert [float(r["x"]) for r in rows if r["status"] == "failed"] == [xs[4]]


def test_a_parallel_polished_batch_is_handed_out_once_each(client, make_body):
    body = make_body(
        pool={"type": "grid", "points_per_dim": 11},
        max_labels=9,
        mode="parallel",
        max_pending=3,
        search=SEARCH,
    )
    campaign = client.post("/campaigns", json=body).json()["id"]
    for _ in range(3):
        _label(client, campaign, next_ticket(client, campaign, seconds=120))
    batch = [next_ticket(client, campaign, seconds=120) for _ in range(3)]
    assert len({tuple(t["x"]) for t in batch}) == 3
    assert {t["model_version"] for t in batch} == {3}
    assert not any(_on_grid(t["x"][0]) for t in batch)
    for ticket in batch:
        _label(client, campaign, ticket)
    status = client.get(f"/campaigns/{campaign}").json()
    assert status["n_labeled"] == 6


@pytest.mark.parametrize(
    ("search", "changes", "why"),
    [
        ({"polish": True, "starts": 0}, {}, "starts"),
        ({"polish": True, "starts": 65}, {}, "starts"),
        ({"polish": "yes"}, {}, "polish"),
        ({"polish": True, "restarts": 2}, {}, "restarts"),
        ({"polish": True}, {"acquisition": "random"}, "no gradient"),
        (
            {"polish": True},
            {"inputs": [{"name": "k", "type": "int", "lower": 1, "upper": 200}]},
            "float and log inputs",
        ),
        (
            {"polish": True},
            {"pool": {"type": "points", "points": [[0.5], [1.0], [1.5], [2.0], [2.5], [0.7]]}},
            "explicit pool",
        ),
    ],
)
def test_a_bad_search_is_422(client, make_body, search, changes, why):
    r = client.post("/campaigns", json=make_body(search=search, **changes))
    assert r.status_code == 422 and why in r.text, r.text


def _ok(x) -> bool:
    return x[0] + x[1] <= 1.0 + 1e-9


@pytest.mark.parametrize("mode", ["sequential", "parallel"])
def test_a_continuous_pool_hands_out_points_of_the_box_inside_the_constraints(
    client, make_body, mode
):
    """Two inputs, a linear constraint, two outputs; in parallel three points out at once:
    every point inside, distinct, labeled and exported as handed out."""
    body = make_body(
        inputs=[{"name": "a", "lower": 0, "upper": 1}, {"name": "b", "lower": 0, "upper": 1}],
        pool={"type": "continuous"},
        pool_subsample=256,
        constraints=["a + b <= 1"],
        outputs=[{"name": "s"}, {"name": "t", "weight": 0.5}],
        max_labels=8,
        mode=mode,
        max_pending=3,
        search={"starts": 2},
    )
    created = client.post("/campaigns", json=body)
    assert created.status_code == 201, created.text
    assert created.json()["pool"] == {"type": "continuous"}
    campaign = created.json()["id"]
    handed = []
    while len(handed) < 8:
        out = min(3, 8 - len(handed)) if mode == "parallel" else 1
        batch = [next_ticket(client, campaign, seconds=120) for _ in range(out)]
        for ticket in batch:
            assert ticket is not None
            handed.append(ticket["x"])
            a, b = ticket["x"]
            y = {"s": math.sin(4 * a) + b, "t": a * b}
            r = client.post(
                f"/campaigns/{campaign}/label", json={"ticket": ticket["ticket"], "y": y}
            )
            assert r.status_code == 201, r.text
    assert all(_ok(x) for x in handed) and len({tuple(x) for x in handed}) == len(handed)
    model = client.get(f"/campaigns/{campaign}/model").json()
    assert model["diagnostics"]["search"]["starts"] == 2
    rows = observations_csv(client, campaign, csv.DictReader)
    assert [[float(r["a"]), float(r["b"])] for r in rows] == handed[: len(rows)]
    assert len(rows) == 8


def test_a_continuous_pool_without_room_or_a_float_input_is_422(client, make_body):
    cut = make_body(pool={"type": "continuous"}, constraints=["x <= 0.4"])
    r = client.post("/campaigns", json=cut)
    assert r.status_code == 422 and "fewer than the initial design" in r.text, r.text
    ints = make_body(
        pool={"type": "continuous"}, inputs=[{"name": "k", "type": "int", "lower": 1, "upper": 9}]
    )
    r = client.post("/campaigns", json=ints)
    assert r.status_code == 422 and "float and log inputs" in r.text, r.text
    r = client.post("/campaigns", json=make_body(pool={"type": "continuous", "size": 5}))
    assert r.status_code == 422, r.text
