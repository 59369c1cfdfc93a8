"""The labeling loop of a campaign with fidelities over HTTP, against the real Redis and worker:
``/next`` says the level to run each point at (the design nested: the top level's points among the
cheap level's), a label is of its ticket's level (a 422 that says which otherwise), imports give
each point's level, the export gives them back, the status counts labels per level and their
cost, and the campaign stops once that cost reaches ``max_cost``. A campaign without fidelities
answers as before (no ``fidelity`` anywhere)."""

import csv
import io

LEVELS = [{"name": "coarse", "cost": 1}, {"name": "fine", "cost": 10}]


def forrester(x: float, level: str) -> float:
    import math

    fine = (6 * x - 2) ** 2 * math.sin(12 * x - 4)
    return fine if level == "fine" else 0.5 * fine + 10 * (x - 0.5) - 5


def _body(make_body, **changes):
    return make_body(
        inputs=[{"name": "x", "lower": 0.0, "upper": 1.0}],
        pool={"type": "grid", "points_per_dim": 51},
        fidelities=LEVELS,
        initial_design={"size": 6},
        max_labels=12,
        **changes,
    )


def _design(client, campaign):
    tickets = [client.get(f"/campaigns/{campaign}/next").json() for _ in range(6)]
    assert client.get(f"/campaigns/{campaign}/next").status_code == 202  # all out
    return tickets


def test_next_says_the_level_and_a_label_must_be_of_its_tickets_level(client, make_body):
    r = client.post("/campaigns", json=_body(make_body, acquisition="qb-mgp"))
    assert r.status_code == 201, r.text
    created = r.json()
    campaign = created["id"]
    assert created["inputs"] == [{"name": "x", "lower": 0.0, "upper": 1.0}]
    assert created["acquisition"] == "qb-mgp" and created["fidelities"][1]["name"] == "fine"
    tickets = _design(client, campaign)
    assert [t["fidelity"] for t in tickets] == ["coarse"] * 4 + ["fine"] * 2
    assert all(len(t["x"]) == 1 for t in tickets)
    assert [t["x"] for t in tickets[4:]] == [t["x"] for t in tickets[:2]]  # nested
    label = f"/campaigns/{campaign}/label"
    fine = tickets[4]
    wrong = client.post(label, json={"ticket": fine["ticket"], "y": 1.0, "fidelity": "coarse"})
    assert wrong.status_code == 422
    assert "issued for level 'fine'" in wrong.json()["detail"]
    unknown = client.post(label, json={"ticket": fine["ticket"], "y": 1.0, "fidelity": "medium"})
    assert unknown.status_code == 422 and "unknown level 'medium'" in unknown.json()["detail"]
    for t in tickets:
        y = forrester(t["x"][0], t["fidelity"])
        said = {"fidelity": t["fidelity"]} if t["fidelity"] == "fine" else {}
        r = client.post(label, json={"ticket": t["ticket"], "y": y, **said})
        assert r.status_code == 201, r.text
    status = client.get(f"/campaigns/{campaign}").json()
    assert status["cost_spent"] == 24.0
    assert status["labels_per_fidelity"] == {"coarse": 4, "fine": 2}
    assert status["inputs"] == [{"name": "x", "lower": 0.0, "upper": 1.0}]
    exported = client.get(f"/campaigns/{campaign}/observations").json()
    assert exported["x"] == [t["x"] for t in tickets]
    assert exported["fidelity"] == [t["fidelity"] for t in tickets]
    text = client.get(f"/campaigns/{campaign}/observations", headers={"Accept": "text/csv"}).text
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [row["fidelity"] for row in rows] == exported["fidelity"]


def test_imports_give_each_points_level(client, make_body):
    campaign = client.post("/campaigns", json=_body(make_body)).json()["id"]
    url = f"/campaigns/{campaign}/observations"
    x, y = [[0.1], [0.3]], [forrester(0.1, "coarse"), forrester(0.3, "fine")]
    missing = client.post(url, json={"x": x, "y": y})
    assert missing.status_code == 422 and "fidelity" in missing.json()["detail"]
    unknown = client.post(url, json={"x": x, "y": y, "fidelity": ["coarse", "best"]})
    assert unknown.status_code == 422 and "unknown level 'best'" in unknown.json()["detail"]
    wide = client.post(url, json={"x": [[0.1, "coarse"]], "y": [1.0], "fidelity": ["coarse"]})
    assert wide.status_code == 422 and "its level goes in fidelity" in wide.json()["detail"]
    r = client.post(url, json={"x": x, "y": y, "fidelity": ["coarse", "fine"]})
    assert r.status_code == 201, r.text
    status = client.get(f"/campaigns/{campaign}").json()
    assert status["labels_per_fidelity"] == {"coarse": 1, "fine": 1}
    assert status["cost_spent"] == 11.0
    assert client.get(url).json()["fidelity"] == ["coarse", "fine"]


def test_the_campaign_stops_once_its_labels_cost_max_cost(client, make_body):
    campaign = client.post("/campaigns", json=_body(make_body, max_cost=15)).json()["id"]
    tickets = _design(client, campaign)
    label = f"/campaigns/{campaign}/label"
    for t in tickets[:4]:  # the cheap level's: 4
        client.post(label, json={"ticket": t["ticket"], "y": forrester(t["x"][0], "coarse")})
    assert client.get(f"/campaigns/{campaign}").json()["stopped_by"] is None
    t = tickets[4]  # the first expensive run: 14
    client.post(label, json={"ticket": t["ticket"], "y": forrester(t["x"][0], "fine")})
    assert client.get(f"/campaigns/{campaign}").json()["state"] == "design"
    t = tickets[5]  # 24 >= 15
    client.post(label, json={"ticket": t["ticket"], "y": forrester(t["x"][0], "fine")})
    status = client.get(f"/campaigns/{campaign}").json()
    assert status["state"] == "done" and status["cost_spent"] == 24.0
    assert status["stopped_by"]["rule"] == "max_cost" and status["stopped_by"]["target"] == 15
    gone = client.get(f"/campaigns/{campaign}/next")
    assert gone.status_code == 410 and "max_cost is 15" in gone.json()["detail"]
    again = client.post(f"/campaigns/{campaign}/resume")
    assert again.status_code == 409 and "does not raise it" in again.json()["detail"]


def test_a_campaign_without_fidelities_says_no_level_and_takes_none(client, make_body):
    created = client.post("/campaigns", json=make_body()).json()
    campaign = created["id"]
    assert "fidelities" not in created and "max_cost" not in created
    ticket = client.get(f"/campaigns/{campaign}/next").json()
    assert set(ticket) == {"ticket", "x", "expires_at", "model_version"}
    r = client.post(
        f"/campaigns/{campaign}/label",
        json={"ticket": ticket["ticket"], "y": 1.0, "fidelity": "fine"},
    )
    assert r.status_code == 422 and "one fidelity" in r.json()["detail"]
    status = client.get(f"/campaigns/{campaign}").json()
    assert status["fidelities"] is None and status["cost_spent"] is None
    url = f"/campaigns/{campaign}/observations"
    r = client.post(url, json={"x": [[1.0]], "y": [2.0], "fidelity": ["fine"]})
    assert r.status_code == 422 and "one fidelity" in r.json()["detail"]
    assert "fidelity" not in client.get(url).json()
