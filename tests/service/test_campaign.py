"""A whole campaign over HTTP against a real Redis and a real worker."""

import math

import numpy as np
from redis import Redis

from clients.simulators import get_simulator
from tests.service.conftest import wait_for_model


def test_sequential_campaign_runs_to_max_labels(client, make_body):
    sim = get_simulator("gramacy1d")
    rng = np.random.default_rng(0)
    r = client.post("/campaigns", json=make_body(max_labels=6))
    assert r.status_code == 201, r.text
    campaign = r.json()["id"]
    assert client.get(f"/campaigns/{campaign}").json()["state"] == "design"

    # the initial design is out all at once: three distinct points, then nothing until labels
    tickets = [client.get(f"/campaigns/{campaign}/next").json() for _ in range(3)]
    xs = [t["x"][0] for t in tickets]
    assert len(set(xs)) == 3 and all(0.5 <= x <= 2.5 for x in xs)
    assert all(t["model_version"] is None for t in tickets)
    assert client.get(f"/campaigns/{campaign}/next").status_code == 202
    assert client.get(f"/campaigns/{campaign}").json()["n_pending"] == 3
    for t in tickets:
        y = float(sim.sample(np.array([t["x"]]), rng)[0])
        r = client.post(f"/campaigns/{campaign}/label", json={"ticket": t["ticket"], "y": y})
        assert r.status_code == 201, r.text
    # a refit is running: sequential mode hands out nothing until the model saw every label
    r = client.get(f"/campaigns/{campaign}/next")
    assert r.status_code == 202 and int(r.headers["Retry-After"]) >= 1

    labeled = 3
    while True:
        r = client.get(f"/campaigns/{campaign}/next", params={"wait": 30})
        if r.status_code == 410:
            break
        assert r.status_code == 200, r.text
        point = r.json()
        assert point["model_version"] == labeled  # chosen by a model that saw every label
        assert point["x"][0] not in xs  # not offered again
        xs.append(point["x"][0])
        y = float(sim.sample(np.array([point["x"]]), rng)[0])
        r = client.post(f"/campaigns/{campaign}/label", json={"ticket": point["ticket"], "y": y})
        assert r.status_code == 201
        labeled += 1
    assert labeled == 6
    status = wait_for_model(client, campaign, 6)
    assert status["state"] == "done" and status["n_labeled"] == 6 and status["last_error"] is None

    model = client.get(f"/campaigns/{campaign}/model").json()
    assert model["version"] == 6 and len(model["samples"]["noise"]) == 2 * 20
    assert len(model["acquisition_samples"]["noise"]) == 2 * 10
    assert {"max_rhat", "min_ess_bulk", "divergences", "seconds"} <= set(model["diagnostics"])
    # every refit after the first may start warm from the one before (or say why it did not)
    assert model["diagnostics"]["warm_start"] != "cold" and "step_size" in model["adaptation"]
    obs = client.get(f"/campaigns/{campaign}/observations").json()
    assert sorted(x[0] for x in obs["x"]) == sorted(xs) and len(obs["y"]) == 6
    csv = client.get(f"/campaigns/{campaign}/observations", headers={"Accept": "text/csv"})
    assert csv.headers["content-type"].startswith("text/csv")
    lines = csv.text.splitlines()  # text cells quoted, numbers bare
    assert lines[0] == '"x","y","status","reason"' and len(lines) == 7
    assert lines[1].endswith(',"ok",""') and lines[1].split(",")[0][0].isdigit()

    # model-based answers run on the worker
    grid = [[0.5], [1.5], [2.5]]
    pred = client.post(f"/campaigns/{campaign}/predict", json={"x": grid}).json()
    assert len(pred["mean"]) == 3 and all(v > 0 for v in pred["variance"])
    assert all(v > 0 for v in pred["mixture_variance"]) and len(pred["mixture_mean"]) == 3
    acq = client.post(f"/campaigns/{campaign}/acquisition", json={"x": grid, "acquisition": "bald"})
    assert acq.status_code == 200 and len(acq.json()["values"]) == 3
    test_x = np.linspace(0.5, 2.5, 20)[:, None]
    test_y = sim.sample(test_x, rng)
    ev = client.post(f"/campaigns/{campaign}/evaluate",
                     json={"x": test_x.tolist(), "y": test_y.tolist()}).json()  # fmt: skip
    assert math.isfinite(ev["nlml"]) and ev["rmse"] > 0 and math.isfinite(ev["nlpd_mixture"])

    assert client.delete(f"/campaigns/{campaign}").status_code == 204
    assert client.get(f"/campaigns/{campaign}").status_code == 404


def test_imported_observations_start_the_model(client, make_body):
    campaign = client.post("/campaigns", json=make_body(max_labels=10)).json()["id"]
    assert client.get(f"/campaigns/{campaign}/model").status_code == 404
    assert client.post(f"/campaigns/{campaign}/predict", json={"x": [[1.0]]}).status_code == 404
    x = [[0.6], [1.1], [1.7], [2.3]]
    r = client.post(f"/campaigns/{campaign}/observations",
                    json={"x": x, "y": [0.1, -0.2, 0.5, 2.0]})  # fmt: skip
    assert r.status_code == 201 and r.json()["n_labeled"] == 4
    status = wait_for_model(client, campaign, 4)
    assert status["state"] == "active"
    point = client.get(f"/campaigns/{campaign}/next").json()
    assert point["model_version"] == 4 and point["x"] not in x
    too_many = {"x": [[1.0]] * 7, "y": [0.0] * 7}
    assert client.post(f"/campaigns/{campaign}/observations", json=too_many).status_code == 409


def test_imports_do_not_repeat_a_pool_point_unless_allowed(client, make_body):
    """Without repeats, an import that holds a pool point labeled already, or one point twice,
    is a 409 and stores nothing; points off the pool may repeat; with repeats, all may."""
    url = "/campaigns/{}/observations"
    campaign = client.post("/campaigns", json=make_body(max_labels=10)).json()["id"]
    first = client.post(url.format(campaign), json={"x": [[0.6], [1.1]], "y": [0.1, 0.2]})
    assert first.status_code == 201
    for x in ([[1.3], [0.6]], [[1.3], [1.3]]):  # labeled already; twice in one import
        r = client.post(url.format(campaign), json={"x": x, "y": [0.0, 0.0]})
        assert r.status_code == 409 and "allow_repeats" in r.json()["detail"], r.text
    assert client.get(f"/campaigns/{campaign}").json()["n_labeled"] == 2  # nothing stored
    off_pool = {"x": [[1.301], [1.301]], "y": [0.0, 0.1]}
    assert client.post(url.format(campaign), json=off_pool).status_code == 201
    again = client.post("/campaigns", json=make_body(max_labels=10, allow_repeats=True)).json()
    twice = {"x": [[0.6], [0.6], [1.1]], "y": [0.1, 0.2, 0.3]}
    assert client.post(url.format(again["id"]), json=twice).status_code == 201
    assert client.post(url.format(again["id"]), json=twice).status_code == 201


def test_campaigns_list_in_pages(client, make_body, monkeypatch):
    ids = sorted(client.post("/campaigns", json=make_body()).json()["id"] for _ in range(5))
    everything = client.get("/campaigns")
    assert [c["id"] for c in everything.json()] == ids  # no limit: all of them, a list
    assert "X-Next-Cursor" not in everything.headers
    seen, cursor, pages = [], None, 0
    while True:
        params = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        page = client.get("/campaigns", params=params)
        assert page.status_code == 200 and len(page.json()) <= 2
        seen += [c["id"] for c in page.json()]
        pages += 1
        cursor = page.headers.get("X-Next-Cursor")
        if cursor is None:
            assert "Link" not in page.headers
            break
        assert (
            page.headers["Link"].endswith('; rel="next"')
            and f"cursor={cursor}" in page.headers["Link"]
        )
    assert seen == ids and pages == 3
    assert client.get("/campaigns", params={"limit": 0}).status_code == 422

    # the index page shows a page of them with a link to the next
    from service import pages as page_module

    monkeypatch.setattr(page_module, "INDEX_PAGE", 2)
    first = client.get("/").text
    assert ids[0] in first and ids[1] in first and ids[2] not in first
    assert f"/?cursor={ids[1]}" in first
    second = client.get("/", params={"cursor": ids[1]}).text
    assert ids[2] in second and ids[3] in second and ids[0] not in second


def test_an_explicit_pool_is_stored_apart_from_the_spec(client, make_body, redis_url):
    """A pool of points is kept as raw rows beside a spec that names only their count: the spec
    read on every call stays small, /next hands out the posted points exactly, imports find
    their pool index, the worker ranks the pool, and a delete leaves no key behind."""
    rng = np.random.default_rng(4)
    points = (0.5 + 2 * rng.random((20_000, 1))).tolist()
    r = client.post("/campaigns", json=make_body(pool={"type": "points", "points": points}))
    assert r.status_code == 201, r.text
    created = r.json()
    campaign = created["id"]
    assert created["pool"]["points"] == points  # the answer shows the campaign as posted
    redis = Redis.from_url(redis_url)
    assert redis.strlen(f"fbgp:c:{campaign}:spec") < 2_000
    assert redis.strlen(f"fbgp:c:{campaign}:points") == 8 * len(points)

    handed = [client.get(f"/campaigns/{campaign}/next").json() for _ in range(2)]
    assert [t["x"] for t in handed] == [points[i] for i in created["design_index"][:2]]
    for t in handed:
        assert client.post(f"/campaigns/{campaign}/label", json={"ticket": t["ticket"], "y": 0.3})
    k = 12_345
    r = client.post(f"/campaigns/{campaign}/observations", json={"x": [points[k]], "y": [0.1]})
    assert r.status_code == 201, r.text
    assert int(k) in {int(i) for i in redis.smembers(f"fbgp:c:{campaign}:labeled")}

    wait_for_model(client, campaign, 3)
    offered = client.get(f"/campaigns/{campaign}/next").json()["x"]
    assert offered in points  # the model's choice is a pool point, as posted

    assert client.delete(f"/campaigns/{campaign}").status_code == 204
    assert not list(redis.scan_iter(f"fbgp:c:{campaign}:*"))
