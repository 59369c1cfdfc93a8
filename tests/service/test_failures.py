"""Failed and abandoned runs over HTTP, against the real Redis and worker: a failure frees a
sequential campaign at once and its point is not offered again (unless ``max_retries``
allows), an abandon gives the point back, both are idempotent like labels, failures are
exported, counted and shown, and a campaign whose points all failed says so."""

import csv
import io
import math

import pytest


def _next(client, campaign, wait=0.0):
    r = client.get(f"/campaigns/{campaign}/next", params={"wait": wait})
    assert r.status_code == 200, r.text
    return r.json()


def _label(client, campaign, ticket, x):
    y = math.sin(3 * x[0]) + x[0]
    r = client.post(f"/campaigns/{campaign}/label", json={"ticket": ticket, "y": y})
    assert r.status_code == 201, r.text


def _fail(client, campaign, ticket, reason="mesh broke"):
    return client.post(f"/campaigns/{campaign}/fail", json={"ticket": ticket, "reason": reason})


def test_a_failure_frees_a_sequential_campaign_at_once_and_its_point_is_not_offered_again(
    client, make_body
):
    body = make_body(initial_design={"type": "maximin-lhs", "size": 2}, max_labels=4)
    campaign = client.post("/campaigns", json=body).json()["id"]
    for _ in range(2):
        t = _next(client, campaign)
        _label(client, campaign, t["ticket"], t["x"])
    held = _next(client, campaign, wait=90)  # from the model of the design
    assert client.get(f"/campaigns/{campaign}/next").status_code == 202  # one out: wait
    r = _fail(client, campaign, held["ticket"])
    assert r.status_code == 201 and r.json() == {"ticket": held["ticket"], "status": "failed",
                                                 "reason": "mesh broke", "count": 1}  # fmt: skip
    assert _fail(client, campaign, held["ticket"]).status_code == 200  # the same again
    assert _fail(client, campaign, held["ticket"], "other").status_code == 409
    assert _fail(client, campaign, "nope").status_code == 404
    again = {"ticket": held["ticket"], "y": 1.0}
    assert client.post(f"/campaigns/{campaign}/label", json=again).status_code == 409
    status = client.get(f"/campaigns/{campaign}").json()
    assert status["n_pending"] == 0 and status["n_failed"] == 1 and not status["stalled"]
    offered = []
    while (r := client.get(f"/campaigns/{campaign}/next", params={"wait": 90})).status_code == 200:
        point = r.json()  # the first at once: the lease ended with the failure
        offered.append(point["x"])
        _label(client, campaign, point["ticket"], point["x"])
    assert r.status_code == 410 and len(offered) == 2 and held["x"] not in offered
    status = client.get(f"/campaigns/{campaign}").json()
    assert status["state"] == "done" and status["n_labeled"] == 4 and status["n_failed"] == 1
    assert not status["failing"] and status["max_failures"] == 4

    data = client.get(f"/campaigns/{campaign}/observations").json()
    assert len(data["y"]) == 4 and held["x"] not in data["x"]  # no model sees the failure
    assert [(f["x"], f["reason"], f["ticket"]) for f in data["failures"]] == [
        (held["x"], "mesh broke", held["ticket"])
    ]
    csv = client.get(f"/campaigns/{campaign}/observations", headers={"Accept": "text/csv"})
    lines = csv.text.splitlines()
    assert lines[0] == '"x","y","status","reason"' and len(lines) == 6
    assert lines[-1] == f'{held["x"][0]!r},"","failed","mesh broke"'
    assert all(line.split(",")[2] == '"ok"' for line in lines[1:5])
    events = [e for e in client.get(f"/campaigns/{campaign}/history").json()
              if e["event"] == "run_failed"]  # fmt: skip
    assert [(e["ticket"], e["reason"]) for e in events] == [(held["ticket"], "mesh broke")]
    metrics = client.get("/metrics").text
    assert "fbgp_runs_failed_total 1.0" in metrics and "fbgp_runs_abandoned_total 0.0" in metrics
    page = client.get(f"/campaigns/{campaign}/view").text
    assert "Failed runs" in page and "mesh broke" in page


def test_abandon_gives_the_point_back_at_once_and_renew_extends_a_live_lease(client, make_body):
    campaign = client.post("/campaigns", json=make_body(lease_seconds=60.0)).json()["id"]
    first, second = _next(client, campaign), _next(client, campaign)
    url = f"/campaigns/{campaign}/abandon"
    r = client.post(url, json={"ticket": first["ticket"]})
    assert r.status_code == 201 and r.json()["status"] == "abandoned" and r.json()["count"] == 1
    assert client.post(url, json={"ticket": first["ticket"]}).status_code == 200
    assert client.post(url, json={"ticket": "nope"}).status_code == 404
    assert _fail(client, campaign, first["ticket"]).status_code == 409
    label = {"ticket": first["ticket"], "y": 1.0}
    assert client.post(f"/campaigns/{campaign}/label", json=label).status_code == 409
    back = _next(client, campaign)
    assert back["x"] == first["x"] and back["ticket"] != first["ticket"]

    renew = f"/campaigns/{campaign}/renew"
    r = client.post(renew, json={"ticket": second["ticket"]})
    assert r.status_code == 200 and r.json()["expires_at"] >= second["expires_at"]
    assert client.post(renew, json={"ticket": first["ticket"]}).status_code == 409  # ended
    assert client.post(renew, json={"ticket": "nope"}).status_code == 404
    status = client.get(f"/campaigns/{campaign}").json()
    assert status["n_abandoned"] == 1 and status["n_failed"] == 0 and status["n_pending"] == 2
    assert status["inputs"] == [{"name": "x", "lower": 0.5, "upper": 2.5}]
    assert "fbgp_runs_abandoned_total 1.0" in client.get("/metrics").text


def test_a_failed_point_is_retried_up_to_max_retries_times(client, make_body):
    body = make_body(initial_design={"type": "maximin-lhs", "size": 1}, max_labels=3,
                     max_retries=2)  # fmt: skip
    campaign = client.post("/campaigns", json=body).json()["id"]
    tries = []
    for _ in range(3):
        t = _next(client, campaign)
        tries.append(t["x"])
        assert _fail(client, campaign, t["ticket"]).status_code == 201
    assert tries[0] == tries[1] == tries[2]  # offered again twice
    other = _next(client, campaign)  # then never again: another point stands in for it
    assert other["x"] != tries[0]
    _label(client, campaign, other["ticket"], other["x"])
    status = client.get(f"/campaigns/{campaign}").json()
    assert status["n_failed"] == 3 and status["n_labeled"] == 1 and status["state"] == "active"


def test_a_campaign_whose_points_all_failed_says_so(client, make_body):
    body = make_body(pool={"type": "points", "points": [[0.5], [1.5]]}, max_labels=2,
                     initial_design={"type": "maximin-lhs", "size": 1},
                     max_failures=1)  # fmt: skip
    campaign = client.post("/campaigns", json=body).json()["id"]
    seen = []
    for _ in range(2):
        t = _next(client, campaign)
        seen.append(t["x"])
        assert _fail(client, campaign, t["ticket"], f"failed at {t['x']}").status_code == 201
    assert sorted(seen) == [[0.5], [1.5]]
    r = client.get(f"/campaigns/{campaign}/next", params={"wait": 1})
    assert r.status_code == 409 and "failed" in r.json()["detail"]
    assert f"POST /campaigns/{campaign}/retry" in r.json()["detail"]
    assert r.headers["content-type"] == "application/problem+json"
    status = client.get(f"/campaigns/{campaign}").json()
    assert status["stalled"] and status["failing"] and status["state"] == "design"
    page = client.get(f"/campaigns/{campaign}/view").text
    assert "stalled" in page and "failing" in page
    # the owner's retry forgives the failures: both points are offered again
    status = client.post(f"/campaigns/{campaign}/retry").json()
    assert not status["stalled"] and not status["failing"] and status["n_forgiven"] == 2
    assert _next(client, campaign)["x"] in seen and status["n_failed"] == 2


def test_a_stalled_campaign_names_its_retry(client, make_body):
    body = make_body(pool={"type": "points", "points": [[0.5], [1.5]]}, max_labels=2,
                     initial_design={"type": "maximin-lhs", "size": 1})  # fmt: skip
    campaign = client.post("/campaigns", json=body).json()["id"]
    for _ in range(2):
        assert _fail(client, campaign, _next(client, campaign)["ticket"]).status_code == 201
    r = client.get(f"/campaigns/{campaign}/next")
    assert r.status_code == 409 and "no point is left to offer" in r.json()["detail"]
    assert f"POST /campaigns/{campaign}/retry" in r.json()["detail"]
    assert not client.get(f"/campaigns/{campaign}").json()["failing"]


def test_a_failing_campaign_hands_out_nothing_until_its_owner_retries_it(client, make_body):
    """Simulators that crash on everything: past max_failures /next answers 409 instead of
    using up the pool, labels of tickets out are still taken, and the owner's retry (once the
    simulator is fixed) hands out points again, those that failed first."""
    body = make_body(initial_design={"type": "maximin-lhs", "size": 3}, max_labels=6,
                     max_failures=1)  # fmt: skip
    campaign = client.post("/campaigns", json=body).json()["id"]
    url = f"/campaigns/{campaign}"
    assert client.post(f"{url}/retry").status_code == 409  # nothing to retry
    a, b, c = (_next(client, campaign) for _ in range(3))
    assert _fail(client, campaign, a["ticket"]).status_code == 201
    d = _next(client, campaign)  # one failure, not more than max_failures: a stand-in
    assert d["x"] not in (a["x"], b["x"], c["x"])
    assert _fail(client, campaign, b["ticket"]).status_code == 201
    r = client.get(f"{url}/next", params={"wait": 1})
    assert r.status_code == 409 and "failing" in r.json()["detail"]
    assert "max_failures (1)" in r.json()["detail"]
    assert f"POST /campaigns/{campaign}/retry" in r.json()["detail"]
    status = client.get(url).json()
    assert status["failing"] and status["n_failed"] == 2 and status["n_forgiven"] == 0
    _label(client, campaign, c["ticket"], c["x"])  # a ticket out is still labeled
    page = client.get(f"{url}/view").text
    assert "no point is handed out until its owner retries it" in page

    status = client.post(f"{url}/retry").json()
    assert not status["failing"] and status["n_failed"] == 2 and status["n_forgiven"] == 2
    again = [_next(client, campaign)["x"] for _ in range(2)]  # d is still out
    assert sorted(again) == sorted([a["x"], b["x"]])  # failed for good before: forgiven
    assert client.post(f"{url}/retry").status_code == 409
    failures = client.get(f"{url}/observations").json()["failures"]
    assert [f["ticket"] for f in failures] == [a["ticket"], b["ticket"]]  # kept, not erased


def test_the_csv_export_does_not_hand_a_spreadsheet_formulas(client, make_body):
    """Text a user wrote (an input's name, a failure's reason) that a spreadsheet would run as
    a formula is exported with a leading ', while numbers, negative ones too, stay numbers."""
    inputs = [{"name": '=HYPERLINK("http://x","y")', "lower": -2.0, "upper": -1.0}]
    body = make_body(inputs=inputs, pool={"type": "grid", "points_per_dim": 11})
    campaign = client.post("/campaigns", json=body).json()["id"]
    first, second = (_next(client, campaign) for _ in range(2))
    _label(client, campaign, first["ticket"], first["x"])
    r = client.post(f"/campaigns/{campaign}/fail",
                    json={"ticket": second["ticket"], "reason": "@SUM(A1:A2)"})  # fmt: skip
    assert r.status_code == 201
    rows = list(csv.reader(io.StringIO(client.get(
        f"/campaigns/{campaign}/observations", headers={"Accept": "text/csv"}).text)))  # fmt: skip
    assert rows[0][0] == """'=HYPERLINK("http://x","y")"""
    assert float(rows[1][0]) == first["x"][0] < 0 and rows[1][2] == "ok"
    assert rows[2][2:] == ["failed", "'@SUM(A1:A2)"]
    # a reason that a reader splitting on ";" would cut into a formula: every part defused,
    # and the cell quoted
    third = _next(client, campaign)
    reason = "ok;=cmd|' /C calc'!A0"
    r = client.post(
        f"/campaigns/{campaign}/fail", json={"ticket": third["ticket"], "reason": reason}
    )
    assert r.status_code == 201
    text = client.get(f"/campaigns/{campaign}/observations", headers={"Accept": "text/csv"}).text
    assert list(csv.reader(io.StringIO(text)))[3][-1] == "ok;'=cmd|' /C calc'!A0"
    for separator in (";", "|", ",", "\t"):
        for line in text.splitlines():
            for cell in line.split(separator):
                assert not cell.strip().lstrip('"').startswith(("=", "+", "@")), (separator, cell)


def test_runs_stored_before_their_count_and_lists_are_counted_and_shown_once(
    client, make_body, settings
):
    """A store written before failures were counted in the state and kept apart from the
    history (its failures' list is their count, and its history holds each as ``run_failed``)
    reads the same: the count goes on from the list's length, and ``/history`` shows each
    failure once."""
    import json

    from redis import Redis

    redis = Redis.from_url(settings.redis_url)
    campaign = client.post("/campaigns", json=make_body()).json()["id"]
    old = {"x": [1.0], "index": 7, "ticket": "t-old", "reason": "old mesh", "at": 1.0}
    redis.rpush(f"fbgp:c:{campaign}:failures", json.dumps(old))
    redis.rpush(f"fbgp:c:{campaign}:history", json.dumps(dict(old, event="run_failed")))
    assert client.get(f"/campaigns/{campaign}").json()["n_failed"] == 1
    ticket = _next(client, campaign)["ticket"]
    assert _fail(client, campaign, ticket).json()["count"] == 2
    assert client.get(f"/campaigns/{campaign}").json()["n_failed"] == 2
    events = client.get(f"/campaigns/{campaign}/history").json()
    assert [(e["event"], e["ticket"]) for e in events] == [("run_failed", "t-old"),
                                                           ("run_failed", ticket)]  # fmt: skip
    # a ticket whose state holds its reason itself (stored before the digest): a repeat with
    # that reason is the same report again, another reason a conflict
    stale = _next(client, campaign)["ticket"]
    redis.hset(f"fbgp:c:{campaign}:ticket_state", stale, "failed:old mesh")
    assert _fail(client, campaign, stale, "old mesh").status_code == 200
    assert _fail(client, campaign, stale, "new mesh").status_code == 409


def test_the_sdk_sees_a_failing_campaign_and_retries_it(api_url, make_body):
    from clients.client import ApiError, FbgpClient

    with FbgpClient(api_url) as api:
        campaign = api.create_campaign(make_body(max_failures=0)).id
        with pytest.raises(ApiError) as error:
            api.retry(campaign)
        assert error.value.status_code == 409 and "nothing to retry" in error.value.detail
        point = api.next_point(campaign)
        api.fail(campaign, point.ticket, "license server down")
        with pytest.raises(ApiError) as error:
            api.try_next(campaign)
        assert error.value.status_code == 409 and "failing" in error.value.detail
        assert api.campaign(campaign).failing
        status = api.retry(campaign)
        assert not status.failing and (status.n_failed, status.n_forgiven) == (1, 1)
        assert api.next_point(campaign).x == point.x


def test_many_simulators_failing_at_once_pause_the_campaign_without_an_error(api_url, make_body):
    """32 simulators that crash on every input, polling and failing at once on a real server:
    every call answers 200, 201 or 409 (never 5xx), the campaign pauses with at most one run
    per simulator past max_failures, and no more points are handed out."""
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    limit, simulators = 20, 32
    body = make_body(mode="parallel", max_pending=simulators, max_labels=50, max_failures=limit,
                     pool={"type": "grid", "points_per_dim": 500})  # fmt: skip
    campaign = httpx.post(f"{api_url}/campaigns", json=body, timeout=30).json()["id"]

    def simulator(k: int) -> list[int]:
        codes = []
        with httpx.Client(base_url=api_url, timeout=60) as api:
            for _ in range(10):
                r = api.get(f"/campaigns/{campaign}/next", params={"wait": 5})
                codes.append(r.status_code)
                if r.status_code != 200:
                    break
                fail = {"ticket": r.json()["ticket"], "reason": f"segfault in simulator {k}"}
                codes.append(api.post(f"/campaigns/{campaign}/fail", json=fail).status_code)
        return codes

    with ThreadPoolExecutor(simulators) as pool:
        codes = [c for run in pool.map(simulator, range(simulators)) for c in run]
    assert set(codes) <= {200, 201, 409}, sorted(set(codes))
    status = httpx.get(f"{api_url}/campaigns/{campaign}", timeout=30).json()
    assert status["failing"] and limit < status["n_failed"] <= limit + simulators, status
    assert codes.count(201) == status["n_failed"] and status["n_pending"] == 0
    r = httpx.get(f"{api_url}/campaigns/{campaign}/next", timeout=30)
    assert r.status_code == 409 and "failing" in r.json()["detail"]
