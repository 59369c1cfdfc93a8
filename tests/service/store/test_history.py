"""A campaign's history (:mod:`service.store.history`): a store written before failures had lists
of their own reads the same, each failure shown once."""


def _next(client, campaign, wait=0.0):
    r = client.get(f"/campaigns/{campaign}/next", params={"wait": wait})
    assert r.status_code == 200, r.text
    return r.json()


def _fail(client, campaign, ticket, reason="mesh broke"):
    return client.post(f"/campaigns/{campaign}/fail", json={"ticket": ticket, "reason": reason})


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
    assert [(e["event"], e["ticket"]) for e in events] == [
        ("run_failed", "t-old"),
        ("run_failed", ticket),
    ]
    # a ticket whose state holds its reason itself (stored before the digest): a repeat with
    # that reason is the same report again, another reason a conflict
    stale = _next(client, campaign)["ticket"]
    redis.hset(f"fbgp:c:{campaign}:ticket_state", stale, "failed:old mesh")
    assert _fail(client, campaign, stale, "old mesh").status_code == 200
    assert _fail(client, campaign, stale, "new mesh").status_code == 409
