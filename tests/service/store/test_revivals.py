"""Refits revived (:mod:`service.store.revivals`): a lost job is enqueued again, a refit whose
enqueue never came is enqueued and counts as nothing, a superseded refit cannot write and one
reviver wins, and a silent refit whose merge waits its turn is alive."""

import json
import time

from redis import Redis

from fbgp_al.service import keys
from tests.service.store.test_refits import _wait


def test_a_lost_refit_job_is_enqueued_again(client, make_body, settings):
    campaign = client.post("/campaigns", json=make_body(max_labels=8)).json()["id"]
    redis = Redis.from_url(settings.redis_url)
    state = f"fbgp:c:{campaign}:state"
    # the state says a refit is queued under a job that vanished (say, Redis lost its queue)
    redis.hset(
        state, mapping={"refit": "queued", "refit_job": "gone", "queued_at": time.time() - 60}
    )
    x = [[0.7], [1.4], [2.2]]
    labels = f"fbgp:c:{campaign}:labels"
    for xi, yi in zip(x, [0.2, -0.1, 0.8], strict=True):
        redis.rpush(labels, json.dumps({"x": xi, "y": yi, "index": None, "ticket": None}))
    r = client.get(f"/campaigns/{campaign}/next", params={"wait": 60})
    assert r.status_code == 200, r.text
    assert r.json()["model_version"] == 3


def test_a_refit_whose_enqueue_never_came_is_enqueued_and_counts_as_no_failure(
    client, make_body, settings
):
    """The API stopped between storing a label (which queued a refit) and enqueuing its job:
    the first refit of a campaign, and a later one. Whoever looks next enqueues it; nothing
    failed, so no failure is counted or written to the history."""
    from fbgp_al.service.store import CampaignStore

    store = CampaignStore(Redis.from_url(settings.redis_url))
    campaign = client.post("/campaigns", json=make_body(max_labels=8)).json()["id"]

    def label_then_stop(ticket: str, y: float) -> None:  # the label route without its enqueue
        assert store.labels.record(campaign, ticket, y, time.time())[0] == "stored"

    for y in (0.1, 0.9, -0.4):  # the third labels the design: a refit is queued, not enqueued
        label_then_stop(client.get(f"/campaigns/{campaign}/next").json()["ticket"], y)
    r = client.get(f"/campaigns/{campaign}/next", params={"wait": 60})
    assert r.status_code == 200, r.text
    assert r.json()["model_version"] == 3
    label_then_stop(r.json()["ticket"], 0.3)  # a later refit, queued after the first one ended
    _wait(lambda: client.get(f"/campaigns/{campaign}").json()["model_version"] == 4)
    events = client.get(f"/campaigns/{campaign}/history").json()
    assert [e["event"] for e in events] == ["model", "model"]
    assert store.campaigns.state(campaign).get("refit_failures", "0") == "0"


def test_a_superseded_refit_cannot_write_and_one_reviver_wins(settings):
    """The fence: once a refit is taken for dead and revived, the old one's model, failure and
    end are refused; of several processes reviving at once, exactly one enqueues a job."""
    from concurrent.futures import ThreadPoolExecutor

    from fbgp_al.service.store import CampaignStore

    redis = Redis.from_url(settings.redis_url.rsplit("/", 1)[0] + "/15")  # no worker serves it
    store = CampaignStore(redis)
    body = {
        "name": "fence",
        "inputs": [{"name": "x", "lower": 0, "upper": 1}],
        "pool": {"type": "grid", "points_per_dim": 11},
        "initial_design": {"size": 1},
        "seed": 0,
        "allow_repeats": False,
        "max_labels": 5,
    }
    campaign = store.campaigns.create(body)["id"]
    state = keys.campaign(campaign, "state")
    now = time.time()
    redis.hset(state, mapping={"refit": "running", "refit_job": "old", "heartbeat": now - 60})
    with ThreadPoolExecutor(8) as pool:
        revived = list(pool.map(lambda _: store.revivals.revive(campaign, now, 15.0), range(8)))
    assert revived.count(True) == 1
    new = store.campaigns.state(campaign)["refit_job"]
    assert new != "old" and store.campaigns.state(campaign)["refit"] == "queued"
    model = {"version": 1, "diagnostics": {"refit_seconds": 1.0}}
    assert not store.models.save(campaign, model, [], "old")
    assert not store.refits.fail(campaign, "boom", 1, "old")
    assert not store.refits.end(campaign, 1, now, "old")
    assert not store.refits.beat(campaign, "old", now)
    assert store.campaigns.state(campaign).get("model_version") is None
    assert store.campaigns.state(campaign)["refit"] == "queued"
    assert not store.campaigns.state(campaign).get("last_error")
    assert store.refits.beat(campaign, new, now, start=True)
    assert (
        store.models.save(campaign, model, [], new)
        and store.models.latest(campaign)["version"] == 1
    )
    redis.flushdb()


def _idle_store(settings):
    """A store on a database that no worker serves, and a fresh 1-D campaign of design size 1."""
    from fbgp_al.service.store import CampaignStore

    redis = Redis.from_url(settings.redis_url.rsplit("/", 1)[0] + "/15")
    store = CampaignStore(redis)
    body = {
        "name": "idle",
        "inputs": [{"name": "x", "lower": 0, "upper": 1}],
        "pool": {"type": "grid", "points_per_dim": 11},
        "initial_design": {"size": 1},
        "seed": 0,
        "allow_repeats": False,
        "max_labels": 5,
    }
    return redis, store, store.campaigns.create(body)["id"]


def test_a_refit_id_written_but_never_enqueued_is_enqueued_anew_and_counts_as_nothing(
    settings, monkeypatch
):
    """The enqueuer wrote its job's id into the state, then stopped before RQ's push: after the
    grace the refit is enqueued under a new id, with no failure counted and none in the
    history."""
    from rq.job import Job

    from fbgp_al.service import queues
    from fbgp_al.service.supervision import ENQUEUE_GRACE_SECONDS

    redis, store, campaign = _idle_store(settings)
    assert store.labels.import_observations(campaign, [[0.5]], [0.1], time.time())[2]
    push = queues.enqueue_refit
    monkeypatch.setattr(queues, "enqueue_refit", lambda *args, **kwargs: None)  # stops first
    written = store.refits.enqueue(campaign)
    monkeypatch.setattr(queues, "enqueue_refit", push)
    assert store.campaigns.state(campaign)["refit_job"] == written and not Job.exists(
        written, redis
    )
    now = time.time()
    assert not store.revivals.revive(campaign, now, 15.0)  # within the grace: its push may come
    later = now + ENQUEUE_GRACE_SECONDS + 0.1
    assert store.revivals.revive(campaign, later, 15.0)
    state = store.campaigns.state(campaign)
    assert state["refit"] == "queued" and state["refit_job"] not in ("", written)
    assert Job.exists(state["refit_job"], redis)
    assert state.get("refit_failures", "0") == "0" and store.history.read(campaign) == []
    assert not store.revivals.revive(campaign, later + 1.0, 15.0)  # it is in RQ now: alive
    redis.flushdb()


def test_a_silent_refit_whose_merge_waits_its_turn_is_alive(settings):
    """A fanned-out refit's chain groups are done and its merge waits in its queue behind other
    jobs: nothing beats, but the refit is alive. Once its merge is gone, or while it still waits
    for its groups (they beat for themselves), silence past the lease is a death."""
    from fbgp_al.service import queues
    from fbgp_al.service.queues import REFIT

    redis, store, campaign = _idle_store(settings)
    queue = queues.queue(REFIT, redis)
    state = keys.campaign(campaign, "state")
    now = time.time()
    redis.hset(
        state,
        mapping={
            "refit": "running",
            "refit_job": "parent",
            "started_at": now - 60,
            "heartbeat": now - 60,
        },
    )
    assert store.refits.note_merge(campaign, "parent", "merge-1")
    assert not store.refits.note_merge(campaign, "another", "merge-2")  # not in charge: not noted
    group = queue.enqueue_call(
        "fbgp_al.service.jobs.refit_chains", args=(campaign,), job_id="group-1"
    )
    queue.enqueue_call(
        "fbgp_al.service.jobs.refit_merge", args=(campaign,), job_id="merge-1", depends_on=group
    )
    # deferred behind a group that no longer beats: dead
    assert store.revivals.revive(campaign, now, 15.0)
    redis.hset(
        state,
        mapping={
            "refit": "running",
            "refit_job": "parent2",
            "heartbeat": now - 60,
            "refit_merge": "merge-3",
        },
    )
    queue.enqueue_call("fbgp_al.service.jobs.refit_merge", args=(campaign,), job_id="merge-3")
    assert not store.revivals.revive(campaign, now, 15.0)  # its merge waits its turn: alive
    queue.remove("merge-3")
    assert store.revivals.revive(campaign, now, 15.0)  # gone from its queue: dead
    redis.flushdb()
