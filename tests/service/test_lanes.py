"""A campaign of long refits refits on the long queue, which a light worker never takes, so a
small campaign keeps a worker; and one campaign's model calls are limited (429 beyond)."""

import signal
import subprocess
import threading
import time

import pytest
from redis import Redis
from rq import Worker

from clients.client import FbgpClient
from service.costs import refit_work
from service.queues import (
    HIGH,
    LIGHT,
    LONG,
    LONGS,
    QUEUES,
    REFIT,
    REFITS,
    TENANTS,
    fetch_job,
    lane,
    ordinary,
    refit_queue,
    take_turns,
    tenant,
)
from service.settings import Settings, get_settings
from service.store import CampaignStore
from tests.conftest import start_worker
from tests.service.conftest import label_design, wait_for_model
from worker.spec.defaults import MCMC_DEFAULTS

BIG = {"chains": 2, "warmup": 2000, "samples": 10_000, "thinning": 100}


@pytest.fixture(scope="module")
def light_worker(redis_url, worker_process):
    """``fbgp-al worker --light`` beside the session's worker; its name."""
    connection = Redis.from_url(redis_url)
    before = {w.name for w in Worker.all(connection=connection)}
    process = start_worker(redis_url, None, "--light")
    deadline = time.monotonic() + 120
    while not (new := {w.name for w in Worker.all(connection=connection)} - before):
        assert process.poll() is None and time.monotonic() < deadline, "no light worker"
        time.sleep(0.1)
    yield new.pop()
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _spec(make_body, **changes) -> dict:
    body = make_body(**changes)
    mcmc = dict(MCMC_DEFAULTS, **body["mcmc"])
    if "samples" in body["mcmc"]:
        mcmc["draws"] = None
    return dict(body, mcmc=mcmc, pool_subsample=10_000, acquisition=body["acquisition"])


def test_the_queue_follows_the_last_refit_then_the_estimate(make_body):
    settings = Settings()
    small, big = _spec(make_body), _spec(make_body, mcmc=BIG)
    assert refit_queue(small, 3, None, settings) == REFIT
    assert refit_queue(big, 3, None, settings) == LONG  # 2 x 12,000 iterations, twice
    assert refit_queue(small, 1500, None, settings) == LONG  # n^3
    wide = _spec(make_body, inputs=[{"name": f"x{i}", "lower": 0, "upper": 1} for i in range(6)],
                 pool={"type": "grid", "points_per_dim": 20})  # fmt: skip
    assert refit_queue(dict(wide, pool_subsample=200_000), 3, None, settings) == LONG  # 4M
    # each feature past 6 adds to the work: a choice of 60 values is 61 features, ~10x
    choice = {"name": "material", "type": "choice", "values": [f"m{k}" for k in range(60)]}
    assert refit_work(dict(small, inputs=[*small["inputs"], choice]), 3) > 10 * refit_work(small, 3)
    assert refit_work(wide, 3) == refit_work(small, 3)  # 6 features: as the paper's problems
    assert refit_queue(dict(small, inputs=[*small["inputs"], choice]), 400, None, settings) == LONG
    assert refit_queue(small, 400, None, settings) == REFIT
    assert refit_queue(small, 3, settings.long_refit_seconds + 1, settings) == LONG
    assert refit_queue(big, 3, 1.0, settings) == REFIT  # what a refit took decides once known


def test_a_small_campaign_refits_on_the_light_worker_while_a_long_refit_runs(
    client, make_body, light_worker, redis_url
):
    redis = Redis.from_url(redis_url)
    names = {w.name: set(w.queue_names()) for w in Worker.all(connection=redis)}
    assert names[light_worker] == set(LIGHT)

    big = client.post("/campaigns", json=make_body(max_labels=30, mcmc=BIG)).json()["id"]
    x = [[0.6 + 0.2 * k] for k in range(8)]
    y = [0.3 * k for k in range(8)]
    r = client.post(f"/campaigns/{big}/observations", json={"x": x, "y": y})
    assert r.status_code == 201
    deadline = time.monotonic() + 60
    while client.get(f"/campaigns/{big}").json()["refit"] != "running":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    store = CampaignStore(redis)
    long_job = fetch_job(store.state(big)["refit_job"], redis)
    assert long_job.origin == LONG and long_job.worker_name != light_worker

    small = client.post("/campaigns", json=make_body(max_labels=10)).json()["id"]
    label_design(client, small, [0.1, 0.4, -0.3])
    wait_for_model(client, small, 3, seconds=60)
    label_design(client, small, [0.2])
    wait_for_model(client, small, 4, seconds=60)
    assert client.get(f"/campaigns/{big}").json()["refit"] == "running"  # still: it is long
    models = [e for e in client.get(f"/campaigns/{small}/history").json() if e["event"] == "model"]
    assert len(models) == 2
    assert client.delete(f"/campaigns/{big}").status_code == 204  # stops its refit


def test_a_model_call_beyond_the_campaigns_limit_is_429_and_the_sdk_waits(
    client, make_body, redis_url, api_url
):
    campaign = client.post("/campaigns", json=make_body(max_labels=10)).json()["id"]
    label_design(client, campaign, [0.1, 0.4, -0.3])
    wait_for_model(client, campaign, 3)
    store = CampaignStore(Redis.from_url(redis_url))
    now = time.time()
    # another client's call is out (limit_model_calls = 1)
    assert store.admit_short(campaign, "short:other", now, now + 60, 1) == 1
    body = {"x": [[1.0], [2.0]], "y": [0.1, 0.2]}
    r = client.post(f"/campaigns/{campaign}/evaluate", json=body)
    assert r.status_code == 429 and r.headers["Retry-After"] == "1", r.text
    assert "limit_model_calls" in r.json()["detail"]
    assert client.post(f"/campaigns/{campaign}/predict", json={"x": [[1.0]]}).status_code == 429
    threading.Timer(1.5, store.forget_jobs, (campaign, ["short:other"])).start()
    with FbgpClient(api_url, token="") as sdk:
        result = sdk.evaluate(campaign, body["x"], body["y"])  # retried after the 429s
    assert result.rmse >= 0
    # the call's own note is gone once it answered: the next is admitted at once
    assert client.post(f"/campaigns/{campaign}/evaluate", json=body).status_code == 200


def test_a_campaign_s_plots_out_at_once_are_bounded(client, make_body, redis_url):
    """A page's plots fit beside a model call; more at once are 429, so that no campaign can
    hold every worker with plots."""
    from service.queues import PAGE_PLOTS

    campaign = client.post("/campaigns", json=make_body(max_labels=10)).json()["id"]
    store = CampaignStore(Redis.from_url(redis_url))
    now = time.time()
    out = [f"short:other-{i}" for i in range(PAGE_PLOTS)]  # limit_model_calls = 1, + 4 plots
    for member in out:
        assert store.admit_short(campaign, member, now, now + 60, 100) == 1
    assert client.get(f"/campaigns/{campaign}/plots/curve.png").status_code != 429
    assert store.admit_short(campaign, "short:one-more", now, now + 60, 100) == 1
    r = client.get(f"/campaigns/{campaign}/plots/curve.png")
    assert r.status_code == 429 and r.headers["Retry-After"] == "1", r.text
    store.forget_jobs(campaign, out + ["short:one-more"])


def test_a_refit_that_ran_long_and_failed_sends_the_next_to_the_long_queue(client, make_body,
                                                                           redis_url):  # fmt: skip
    """A refit killed by its timeout leaves no refit time behind (only a model does); its
    next attempt still goes where long refits go, not to the light worker's queue, until a
    model says how long a refit takes."""
    campaign = client.post("/campaigns", json=make_body(max_labels=10)).json()["id"]
    redis = Redis.from_url(redis_url)
    store = CampaignStore(redis)
    spec = store.spec(campaign)
    assert lane(spec, store._refit_job(campaign, spec)[1]) == REFIT
    started = time.time() - get_settings().long_refit_seconds - 5
    redis.hset(
        f"fbgp:c:{campaign}:state",
        mapping={"refit": "running", "refit_job": "job-1", "started_at": started},
    )
    assert store.refit_failed(campaign, "killed: its timeout", 3, token="job-1")
    assert lane(spec, store._refit_job(campaign, spec)[1]) == LONG
    assert store.state(campaign)["refit"] == "idle"  # backing off: nothing enqueued yet
    client.delete(f"/campaigns/{campaign}")


@pytest.mark.parametrize(("ran", "queue"), [(1.0, REFIT), (None, LONG)])
def test_a_refit_that_died_counts_until_its_last_heartbeat(client, make_body, redis_url, ran,
                                                           queue):  # fmt: skip
    """A refit whose worker was killed is noticed dead a lease (15 s) or more after its last
    heartbeat: what it ran is until that heartbeat, so a refit killed a second in stays on the
    ordinary queue (where a light worker takes it, should the killed worker be the only other),
    and one that beat for longer than ``long_refit_seconds`` goes to the long queue."""
    long = get_settings().long_refit_seconds
    ran = long + 5 if ran is None else ran
    campaign = client.post("/campaigns", json=make_body(max_labels=10)).json()["id"]
    redis = Redis.from_url(redis_url)
    store = CampaignStore(redis)
    now = time.time()
    started = now - ran - 60  # its death noticed a minute after its last heartbeat
    redis.hset(f"fbgp:c:{campaign}:state",
               mapping={"refit": "running", "refit_job": "gone-job", "started_at": started,
                        "heartbeat": started + ran, "queued_at": started})  # fmt: skip
    # taken for dead: its job is unknown to RQ and its heartbeat a minute old
    assert store.revive_refit(campaign, now, lease=15)
    spec = store.spec(campaign)
    assert lane(spec, store._refit_job(campaign, spec)[1]) == queue
    client.delete(f"/campaigns/{campaign}")


def test_a_teams_refits_queue_under_its_tenant(make_body):
    settings = Settings()
    small, big = _spec(make_body, team="alpha"), _spec(make_body, mcmc=BIG, team="alpha")
    t = tenant("alpha")
    assert 1 <= t < TENANTS and tenant(None) == 0 and tenant("alpha") == t
    assert refit_queue(small, 3, None, settings) == REFITS[t] != REFIT
    assert refit_queue(big, 3, None, settings) == LONGS[t] != LONG
    assert ordinary(LONGS[t]) == REFITS[t] and ordinary(REFITS[t]) == REFITS[t]
    assert ordinary(LONG) == REFIT
    assert len(set(QUEUES)) == 2 * TENANTS + 1 and set(LIGHT) == {HIGH, *REFITS}


def test_a_worker_takes_the_tenants_queues_in_turn():
    """The queue just served goes last in its lane; the high queue stays first, and the long
    lane stays after the ordinary one."""
    order = list(QUEUES)
    order = take_turns(order, REFITS[2], name=str)
    assert order[0] == HIGH
    assert order[1 : TENANTS + 1] == [*REFITS[3:], *REFITS[:3]]
    assert order[TENANTS + 1 :] == list(LONGS)
    order = take_turns(order, REFITS[5], name=str)  # the rest keep their turns
    assert order[1 : TENANTS + 1] == [*REFITS[6:], *REFITS[:6]]
    assert take_turns(order, HIGH, name=str) == order
    light = take_turns(list(LIGHT), LONGS[1], name=str)  # a lane it does not serve: unchanged
    assert light == list(LIGHT)
