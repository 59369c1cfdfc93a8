"""A campaign's jobs (:mod:`service.store.jobs`): one campaign's model calls and pictures out at
once are bounded (429 beyond), and the SDK waits; the workers as a refit counts them, with the
campaigns that want one read only when a worker idles beyond the jobs waiting."""

import threading
import time

from redis import Redis
from rq import Worker

from fbgp_al.clients.client import FbgpClient
from fbgp_al.service import queues
from fbgp_al.service.keys import CAMPAIGNS
from fbgp_al.service.store import CampaignStore
from tests.service.conftest import label_design, wait_for_model


def test_a_model_call_beyond_the_campaigns_limit_is_429_and_the_sdk_waits(
    client, make_body, redis_url, api_url
):
    campaign = client.post("/campaigns", json=make_body(max_labels=10)).json()["id"]
    label_design(client, campaign, [0.1, 0.4, -0.3])
    wait_for_model(client, campaign, 3)
    store = CampaignStore(Redis.from_url(redis_url))
    now = time.time()
    # another client's call is out (limit_model_calls = 1)
    assert store.jobs.admit_short(campaign, "short:other", now, now + 60, 1) == 1
    body = {"x": [[1.0], [2.0]], "y": [0.1, 0.2]}
    r = client.post(f"/campaigns/{campaign}/evaluate", json=body)
    assert r.status_code == 429 and r.headers["Retry-After"] == "1", r.text
    assert "limit_model_calls" in r.json()["detail"]
    assert client.post(f"/campaigns/{campaign}/predict", json={"x": [[1.0]]}).status_code == 429
    threading.Timer(1.5, store.jobs.forget, (campaign, ["short:other"])).start()
    with FbgpClient(api_url, token="") as sdk:
        result = sdk.evaluate(campaign, body["x"], body["y"])  # retried after the 429s
    assert result.rmse >= 0
    # the call's own note is gone once it answered: the next is admitted at once
    assert client.post(f"/campaigns/{campaign}/evaluate", json=body).status_code == 200


def test_a_campaign_s_plots_out_at_once_are_bounded(client, make_body, redis_url):
    """A page's plots fit beside a model call; more at once are 429, so that no campaign can
    hold every worker with plots."""
    from fbgp_al.service.model_calls import PAGE_PLOTS

    campaign = client.post("/campaigns", json=make_body(max_labels=10)).json()["id"]
    store = CampaignStore(Redis.from_url(redis_url))
    now = time.time()
    out = [f"short:other-{i}" for i in range(PAGE_PLOTS)]  # limit_model_calls = 1, + the plots
    for member in out:
        assert store.jobs.admit_short(campaign, member, now, now + 60, 100) == 1
    assert client.get(f"/campaigns/{campaign}/plots/curve.png").status_code != 429
    assert store.jobs.admit_short(campaign, "short:one-more", now, now + 60, 100) == 1
    r = client.get(f"/campaigns/{campaign}/plots/curve.png")
    assert r.status_code == 429 and r.headers["Retry-After"] == "1", r.text
    store.jobs.forget(campaign, out + ["short:one-more"])


def test_the_workforce_is_every_worker_its_queues_and_state_and_who_wants_one(bare_store):
    """Two workers, one idle and one busy, on a database of their own: each with its queues and
    state, the jobs waiting counted; the campaigns that want a worker (a ticket out) are read
    while a worker idles beyond the jobs waiting, and not once a job waits for it."""
    store, now = bare_store, time.time()
    store.r.sadd(CAMPAIGNS, "out", "refitting", "quiet")
    store.r.zadd(store.jobs.k("out", "leases"), {"ticket": now + 60})  # a ticket out
    store.r.zadd(store.jobs.k("quiet", "leases"), {"ticket": now - 60})  # expired
    store.r.hset(store.jobs.k("refitting", "state"), "refit", "queued")
    idle = Worker([queues.REFIT], connection=store.r, name="idle-hand")
    busy = Worker([queues.LONG], connection=store.r, name="busy-hand")
    try:
        for pid, (worker, state) in enumerate(((idle, "idle"), (busy, "busy")), 1):
            worker.pid = pid  # two processes: one worker each counts
            worker.register_birth()
            worker.set_state(state)
        got = store.jobs.workforce(now)
        hands = {h.name: (h.queues, h.state) for h in got.hands}
        assert hands == {
            "idle-hand": (frozenset({queues.REFIT}), "idle"),
            "busy-hand": (frozenset({queues.LONG}), "busy"),
        }
        assert got.waiting == 0 and got.wanting == frozenset({"out", "refitting"})
        queues.queue(queues.REFIT, store.r).enqueue_call("fbgp_al.service.jobs.refit", ("x",))
        got = store.jobs.workforce(now)
        assert got.waiting == 1 and got.wanting is None  # no worker left to take
    finally:
        for worker in (idle, busy):
            worker.register_death()
        store.r.flushdb()
