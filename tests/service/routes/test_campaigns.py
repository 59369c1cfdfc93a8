"""Campaigns over HTTP (:mod:`service.routes.campaigns`) against a real Redis and a real worker: a
whole campaign created, labeled to its end, read and deleted; the campaigns listed in pages."""

import math

import numpy as np

from fbgp_al.clients.simulators import get_simulator
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
    ev = client.post(
        f"/campaigns/{campaign}/evaluate", json={"x": test_x.tolist(), "y": test_y.tolist()}
    ).json()
    assert math.isfinite(ev["nlml"]) and ev["rmse"] > 0 and math.isfinite(ev["nlpd_mixture"])

    assert client.delete(f"/campaigns/{campaign}").status_code == 204
    assert client.get(f"/campaigns/{campaign}").status_code == 404


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
    from fbgp_al.service import pages as page_module

    monkeypatch.setattr(page_module, "INDEX_PAGE", 2)
    first = client.get("/").text
    assert ids[0] in first and ids[1] in first and ids[2] not in first
    assert f"/?cursor={ids[1]}" in first
    second = client.get("/", params={"cursor": ids[1]}).text
    assert ids[2] in second and ids[3] in second and ids[0] not in second
