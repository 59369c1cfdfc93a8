"""Labels: idempotent by ticket, exactly one 201 under concurrency, never lost."""

import time
from concurrent.futures import ThreadPoolExecutor


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
        r = client.post(f"/campaigns/{campaign}/label", content=f'{{"ticket": "{t}", "y": {raw}}}',
                        headers={"Content-Type": "application/json"})  # fmt: skip
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
