"""The labeling loop over HTTP (:mod:`service.routes.labeling`), against the real Redis and worker.
Labels: idempotent by ticket, exactly one 201 under concurrency, never lost. Failed and abandoned
runs: a failure frees a sequential campaign at once and its point is not offered again (unless
``max_retries`` allows), an abandon gives the point back, both are idempotent like labels,
failures are exported, counted and shown, and a campaign whose points all failed says so (the
SDK too). Imported observations start the model; a malformed ``Idempotency-Key`` is a 422; a
campaign lock not acquired is named as such."""

import math
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from redis import Redis

from fbgp_al.service.store import CampaignStore
from tests.service.conftest import wait_for_model


def _ticket(client, campaign):
    r = client.get(f"/campaigns/{campaign}/next")
    assert r.status_code == 200, r.text
    return r.json()


def test_repeat_is_200_conflict_is_409_unknown_is_404(client, make_body):
    campaign = client.post("/campaigns", json=make_body()).json()["id"]
    t = _ticket(client, campaign)["ticket"]
    url = f"/campaigns/{campaign}/label"
    assert client.post(url, json={"ticket": t, "y": 1.25}).status_code == 201
    again = client.post(url, json={"ticket": t, "y": 1.25})
    assert again.status_code == 200 and again.json()["n_labeled"] == 1
    assert client.post(url, json={"ticket": t, "y": 1.5}).status_code == 409
    assert client.post(url, json={"ticket": "nope", "y": 1.0}).status_code == 404
    assert client.get(f"/campaigns/{campaign}/observations").json()["y"] == [1.25]


def test_nan_and_infinite_labels_are_422_not_500(client, make_body):
    campaign = client.post("/campaigns", json=make_body()).json()["id"]
    t = _ticket(client, campaign)["ticket"]
    for raw in ("NaN", "Infinity", "-Infinity", "1e309", "-1e309", '"abc"', "null"):
        r = client.post(
            f"/campaigns/{campaign}/label",
            content=f'{{"ticket": "{t}", "y": {raw}}}',
            headers={"Content-Type": "application/json"},
        )
        assert r.status_code == 422, (raw, r.text)
        assert "y" in r.json()["detail"]
    assert client.get(f"/campaigns/{campaign}").json()["n_labeled"] == 0


def test_concurrent_posts_of_one_ticket_store_it_once(client, make_body):
    campaign = client.post("/campaigns", json=make_body()).json()["id"]
    same = _ticket(client, campaign)["ticket"]
    other = _ticket(client, campaign)["ticket"]
    url = f"/campaigns/{campaign}/label"

    def post(ticket, y):
        return client.post(url, json={"ticket": ticket, "y": y}).status_code

    with ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(lambda _: post(same, 0.5), range(16)))
        mixed = list(pool.map(lambda k: post(other, 0.1 * k), range(16)))
    assert codes.count(201) == 1 and codes.count(200) == 15
    assert mixed.count(201) == 1 and mixed.count(409) + mixed.count(200) == 15
    assert client.get(f"/campaigns/{campaign}").json()["n_labeled"] == 2


def test_expired_lease_returns_the_point_and_a_late_label_is_still_taken(client, make_body):
    # long enough that the design is still out when the fourth call comes, on a loaded machine
    campaign = client.post("/campaigns", json=make_body(lease_seconds=3.0)).json()["id"]
    first = [_ticket(client, campaign) for _ in range(3)]  # the whole design is out
    assert client.get(f"/campaigns/{campaign}/next").status_code == 202
    time.sleep(max(0.0, max(t["expires_at"] for t in first) - time.time()) + 0.05)
    again = _ticket(client, campaign)  # an expired point comes back under a new ticket
    assert again["x"] in [t["x"] for t in first] and again["ticket"] not in [
        t["ticket"] for t in first
    ]
    late = next(t for t in first if t["x"] == again["x"])
    url = f"/campaigns/{campaign}/label"
    assert client.post(url, json={"ticket": late["ticket"], "y": 0.7}).status_code == 201
    # its point has a label now: the newer ticket for the same point cannot label it again
    assert client.post(url, json={"ticket": again["ticket"], "y": 0.9}).status_code == 409
    assert client.get(f"/campaigns/{campaign}").json()["n_labeled"] == 1


def test_done_campaign_answers_410(client, make_body):
    campaign = client.post("/campaigns", json=make_body(max_labels=3)).json()["id"]
    tickets = [_ticket(client, campaign)["ticket"] for _ in range(3)]
    for k, t in enumerate(tickets):
        assert (
            client.post(
                f"/campaigns/{campaign}/label", json={"ticket": t, "y": float(k)}
            ).status_code
            == 201
        )
    assert client.get(f"/campaigns/{campaign}/next").status_code == 410
    assert client.get(f"/campaigns/{campaign}").json()["state"] == "done"


def test_twenty_simultaneous_posts_of_one_ticket_over_http(api_url, make_body):
    """Exactly one 201; the others with the winner's y get 200, those with another y 409."""
    import threading

    import httpx

    with httpx.Client(base_url=api_url, timeout=30) as api:
        campaign = api.post("/campaigns", json=make_body()).json()["id"]
        ticket = api.get(f"/campaigns/{campaign}/next").json()["ticket"]
    values = [0.5 if k % 2 else -1.5 for k in range(20)]
    start = threading.Barrier(20)
    codes: list[int | None] = [None] * 20

    def post(k: int) -> None:
        with httpx.Client(base_url=api_url, timeout=30) as own:
            start.wait()
            body = {"ticket": ticket, "y": values[k]}
            codes[k] = own.post(f"/campaigns/{campaign}/label", json=body).status_code

    threads = [threading.Thread(target=post, args=(k,)) for k in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert codes.count(201) == 1, codes
    winner = values[codes.index(201)]
    for k, code in enumerate(codes):
        if k != codes.index(201):
            assert code == (200 if values[k] == winner else 409), (k, values[k], code)
    with httpx.Client(base_url=api_url, timeout=30) as api:
        assert api.get(f"/campaigns/{campaign}/observations").json()["y"] == [winner]


def test_a_ticket_of_another_campaign_is_404_there(client, make_body):
    mine = client.post("/campaigns", json=make_body()).json()["id"]
    theirs = client.post("/campaigns", json=make_body()).json()["id"]
    ticket = _ticket(client, theirs)["ticket"]
    r = client.post(f"/campaigns/{mine}/label", json={"ticket": ticket, "y": 1.0})
    assert r.status_code == 404 and "ticket" in r.json()["detail"]
    assert client.get(f"/campaigns/{mine}").json()["n_labeled"] == 0
    assert (
        client.post(f"/campaigns/{theirs}/label", json={"ticket": ticket, "y": 1.0}).status_code
        == 201
    )


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
    assert r.status_code == 201 and r.json() == {
        "ticket": held["ticket"],
        "status": "failed",
        "reason": "mesh broke",
        "count": 1,
    }
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
    events = [
        e for e in client.get(f"/campaigns/{campaign}/history").json() if e["event"] == "run_failed"
    ]
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
    body = make_body(initial_design={"type": "maximin-lhs", "size": 1}, max_labels=3, max_retries=2)
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
    body = make_body(
        pool={"type": "points", "points": [[0.5], [1.5]]},
        max_labels=2,
        initial_design={"type": "maximin-lhs", "size": 1},
        max_failures=1,
    )
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
    # failing (past max_failures) and stalled (no point left) at once: it says failing
    assert status["stalled"] and status["failing"] and status["state"] == "failing"
    page = client.get(f"/campaigns/{campaign}/view").text
    assert "stalled" in page and "failing" in page
    # the owner's retry forgives the failures: both points are offered again
    status = client.post(f"/campaigns/{campaign}/retry").json()
    assert not status["stalled"] and not status["failing"] and status["n_forgiven"] == 2
    assert _next(client, campaign)["x"] in seen and status["n_failed"] == 2


def test_a_stalled_campaign_names_its_retry(client, make_body):
    body = make_body(
        pool={"type": "points", "points": [[0.5], [1.5]]},
        max_labels=2,
        initial_design={"type": "maximin-lhs", "size": 1},
    )
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
    body = make_body(
        initial_design={"type": "maximin-lhs", "size": 3}, max_labels=6, max_failures=1
    )
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


def test_the_sdk_sees_a_failing_campaign_and_retries_it(api_url, make_body):
    from fbgp_al.clients.client import ApiError, FbgpClient

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
    body = make_body(
        mode="parallel",
        max_pending=simulators,
        max_labels=50,
        max_failures=limit,
        pool={"type": "grid", "points_per_dim": 500},
    )
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


def test_imported_observations_start_the_model(client, make_body):
    campaign = client.post("/campaigns", json=make_body(max_labels=10)).json()["id"]
    assert client.get(f"/campaigns/{campaign}/model").status_code == 404
    assert client.post(f"/campaigns/{campaign}/predict", json={"x": [[1.0]]}).status_code == 404
    x = [[0.6], [1.1], [1.7], [2.3]]
    r = client.post(
        f"/campaigns/{campaign}/observations", json={"x": x, "y": [0.1, -0.2, 0.5, 2.0]}
    )
    assert r.status_code == 201 and r.json()["n_labeled"] == 4
    status = wait_for_model(client, campaign, 4)
    assert status["state"] == "active"
    point = client.get(f"/campaigns/{campaign}/next").json()
    assert point["model_version"] == 4 and point["x"] not in x
    too_many = {"x": [[1.0]] * 7, "y": [0.0] * 7}
    assert client.post(f"/campaigns/{campaign}/observations", json=too_many).status_code == 409


@pytest.mark.parametrize("key", ["", "has space", "x" * 201, "caf\u00e9"])
def test_a_malformed_key_is_422(client, make_body, key):
    campaign = client.post("/campaigns", json=make_body()).json()["id"]
    r = client.get(f"/campaigns/{campaign}/next", headers=[("Idempotency-Key", key.encode())])
    assert r.status_code == 422, r.text
    assert "idempotency-key" in r.text.lower()


def test_a_campaign_lock_not_acquired_is_named_as_such(client, settings, make_body):
    """503 for a campaign whose lock another process holds says so (not "store unreachable")."""
    settings.lock_timeout_seconds = 0.3
    campaign = client.post("/campaigns", json=make_body()).json()["id"]
    lock = CampaignStore(Redis.from_url(settings.redis_url)).campaigns.lock(campaign, timeout=10)
    assert lock.acquire()
    try:
        answer = client.get(f"/campaigns/{campaign}/next", params={"wait": 1})
    finally:
        lock.release()
    assert answer.status_code == 503, answer.text
    assert "lock was not acquired" in answer.json()["detail"]
    assert "Retry-After" in answer.headers
    assert client.get(f"/campaigns/{campaign}/next").status_code == 200


LEVELS = {"2.975", "3.425", "3.875", "4.325", "4.775", "5.225"}


@pytest.mark.parametrize("typed", [False, True])
def test_next_hands_out_a_grid_s_levels_as_their_shortest_decimals(client, make_body, typed):
    """A grid's levels reach the simulator as the decimals the page shows (4.325, not
    4.324999999999999, the rounding of ``lower + v (upper - lower)``), with float inputs alone
    and beside an int input: the whole grid handed out, each of its six levels so."""
    inputs = [{"name": "x", "lower": 2.975, "upper": 5.225}]
    if typed:
        inputs.append({"name": "k", "type": "int", "lower": 1, "upper": 2})
    size = 12 if typed else 6
    body = make_body(
        inputs=inputs,
        pool={"type": "grid", "points_per_dim": 6},
        initial_design={"type": "maximin-lhs", "size": size},
        mode="parallel",
        max_pending=size,
        max_labels=size,
    )
    created = client.post("/campaigns", json=body)
    assert created.status_code == 201, created.text
    campaign = created.json()["id"]
    handed = [client.get(f"/campaigns/{campaign}/next").json()["x"][0] for _ in range(size)]
    assert {repr(x) for x in handed} == LEVELS
