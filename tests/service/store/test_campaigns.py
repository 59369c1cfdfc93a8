"""A campaign's spec, pool and delete (:mod:`service.store.campaigns`), against the real Redis: an
explicit pool is kept apart from the spec, and a delete racing the calls that write a campaign's
keys leaves none behind (whatever comes after the delete writes nothing)."""

import threading
import time

import numpy as np
import pytest
from redis import Redis

from fbgp_al.service.queues import REFIT, queue
from fbgp_al.service.refusals import NotFound
from fbgp_al.service.store import CampaignStore
from tests.service.conftest import wait_for_model


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


def _keys(redis: Redis, campaign: str) -> list[bytes]:
    return sorted(redis.scan_iter(f"fbgp:c:{campaign}*"))


def _labeled_design_but_one(client, campaign: str) -> str:
    """The design's tickets out, all but the last labeled: the last one's ticket."""
    tickets = [client.get(f"/campaigns/{campaign}/next").json()["ticket"] for _ in range(3)]
    for ticket in tickets[:-1]:
        r = client.post(f"/campaigns/{campaign}/label", json={"ticket": ticket, "y": 0.5})
        assert r.status_code == 201, r.text
    return tickets[-1]


def test_writes_that_come_after_a_delete_leave_no_key(client, make_body, settings):
    """In the order a race can give them: the label that completes the design is stored and
    asks for a refit, the campaign is deleted, then the refit is enqueued; a look at /next
    that read the campaign before the delete issues its tickets after it; an evaluation is
    recorded after it. None of these may write a key (or enqueue a job)."""
    redis = Redis.from_url(settings.redis_url)
    store = CampaignStore(redis)
    campaign = client.post("/campaigns", json=make_body()).json()["id"]
    last = _labeled_design_but_one(client, campaign)
    outcome, n, enqueue = store.labels.record(campaign, last, 0.25, time.time())
    assert n == 3 and enqueue
    store.campaigns.delete(campaign)
    assert _keys(redis, campaign) == []
    queued = queue(REFIT, redis).count
    assert store.refits.enqueue(campaign) is None
    assert queue(REFIT, redis).count == queued
    with pytest.raises(NotFound):
        store.tickets.issue(campaign, [(5, [1.0], None)], 60.0, time.time())
    store.models.record_evaluation(campaign, 3, {"nlml": 1.0, "rmse": 1.0, "nlpd_mixture": 1.0})
    assert store.refits.fail(campaign, "boom", 3, "any") is False
    assert _keys(redis, campaign) == []


def test_labels_racing_deletes_over_http_leave_no_key(client, make_body, settings):
    """Labels that complete the design, posted while their campaigns are deleted: every
    campaign's keys are gone once both answered, whichever came first."""
    redis = Redis.from_url(settings.redis_url)
    campaigns = []
    for _ in range(12):
        campaign = client.post("/campaigns", json=make_body()).json()["id"]
        campaigns.append((campaign, _labeled_design_but_one(client, campaign)))
    answers = []

    def label(campaign: str, ticket: str) -> None:
        r = client.post(f"/campaigns/{campaign}/label", json={"ticket": ticket, "y": 0.1})
        answers.append(r.status_code)

    def delete(campaign: str) -> None:
        answers.append(client.delete(f"/campaigns/{campaign}").status_code)

    threads = []
    for campaign, ticket in campaigns:
        threads += [
            threading.Thread(target=label, args=(campaign, ticket)),
            threading.Thread(target=delete, args=(campaign,)),
        ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(answers) <= {201, 204, 404}, answers
    time.sleep(1.0)  # a refit enqueued before a delete finds itself not in charge and ends
    for campaign, _ in campaigns:
        assert _keys(redis, campaign) == [], campaign
