"""Queues and lanes (:mod:`service.queues`): a campaign of long refits refits on the long queue,
which a light worker never takes, so a small campaign keeps a worker; a team's refits queue under
its tenant, whose queues a worker takes in turn; a job is alive while it is in its queue, on its
way to a work horse or on a worker that beats; a job canceled as it starts is stopped; and
campaigns share the workers: a busy campaign's next refit queues behind the others'."""

import signal
import subprocess
import time

import pytest
from redis import Redis
from rq import Queue, Worker
from rq.job import JobStatus

from fbgp_al.service.costs import long_refit, refit_work
from fbgp_al.service.queues import (
    HIGH,
    HIGH_LONG,
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
    queue,
    refit_queue,
    take_turns,
    tenant,
)
from fbgp_al.service.settings import Settings, get_settings
from fbgp_al.service.store import CampaignStore
from fbgp_al.worker.vocabulary.defaults import MCMC_DEFAULTS
from tests.conftest import start_worker
from tests.service.conftest import label_design, wait_for_model

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
    wide = _spec(
        make_body,
        inputs=[{"name": f"x{i}", "lower": 0, "upper": 1} for i in range(6)],
        pool={"type": "grid", "points_per_dim": 20},
    )
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
    long_job = fetch_job(store.campaigns.state(big)["refit_job"], redis)
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


def test_a_long_model_call_runs_where_no_light_worker_takes_it(
    client, make_body, light_worker, redis_url
):
    """A /predict estimated over ``long_call_seconds`` waits in the long calls' queue, which
    the light worker does not serve: the other worker answers it. A short one waits in the high
    queue, which both serve."""
    from rq.registry import FinishedJobRegistry

    redis = Redis.from_url(redis_url)
    campaign = client.post("/campaigns", json=make_body(max_labels=10)).json()["id"]
    label_design(client, campaign, [0.1, 0.4, -0.3])
    wait_for_model(client, campaign, 3)
    points = int(1.5 * Settings().long_call_seconds / 5e-5)  # 1.5x the bound's points
    finished = {q: FinishedJobRegistry(q, connection=redis) for q in (HIGH, HIGH_LONG)}
    before = {q: set(r.get_job_ids()) for q, r in finished.items()}
    for x in ([[1.0]] * points, [[1.0]]):
        r = client.post(f"/campaigns/{campaign}/predict", json={"x": x})
        assert r.status_code == 200, r.text[:300]
    ran = {q: set(r.get_job_ids()) - before[q] for q, r in finished.items()}
    assert len(ran[HIGH_LONG]) == 1 and len(ran[HIGH]) == 1, ran
    job = fetch_job(ran[HIGH_LONG].pop(), redis)
    assert job.origin == HIGH_LONG and job.worker_name != light_worker


def test_a_refit_that_ran_long_and_failed_sends_the_next_to_the_long_queue(
    client, make_body, redis_url
):
    """A refit killed by its timeout leaves no refit time behind (only a model does); its
    next attempt still goes where long refits go, not to the light worker's queue, until a
    model says how long a refit takes."""
    campaign = client.post("/campaigns", json=make_body(max_labels=10)).json()["id"]
    redis = Redis.from_url(redis_url)
    store = CampaignStore(redis)
    spec = store.campaigns.spec(campaign)
    assert lane(spec, store.refits._refit_job(campaign, spec)[1]) == REFIT
    started = time.time() - get_settings().long_refit_seconds - 5
    redis.hset(
        f"fbgp:c:{campaign}:state",
        mapping={"refit": "running", "refit_job": "job-1", "started_at": started},
    )
    assert store.refits.fail(campaign, "killed: its timeout", 3, token="job-1")
    assert lane(spec, store.refits._refit_job(campaign, spec)[1]) == LONG
    assert store.campaigns.state(campaign)["refit"] == "idle"  # backing off: nothing enqueued yet
    client.delete(f"/campaigns/{campaign}")


@pytest.mark.parametrize(("ran", "queue"), [(1.0, REFIT), (None, LONG)])
def test_a_refit_that_died_counts_until_its_last_heartbeat(
    client, make_body, redis_url, ran, queue
):
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
    redis.hset(
        f"fbgp:c:{campaign}:state",
        mapping={
            "refit": "running",
            "refit_job": "gone-job",
            "started_at": started,
            "heartbeat": started + ran,
            "queued_at": started,
        },
    )
    # taken for dead: its job is unknown to RQ and its heartbeat a minute old
    assert store.revivals.revive(campaign, now, lease=15)
    spec = store.campaigns.spec(campaign)
    assert lane(spec, store.refits._refit_job(campaign, spec)[1]) == queue
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
    assert len(set(QUEUES)) == 2 * TENANTS + 2 and set(LIGHT) == {HIGH, *REFITS}
    assert HIGH_LONG in QUEUES and HIGH_LONG not in LIGHT


def test_a_worker_takes_the_tenants_queues_in_turn():
    """The queue just served goes last in its lane; the high queue stays first, and the long
    lane stays after the ordinary one."""
    order = list(QUEUES)
    order = take_turns(order, REFITS[2], name=str)
    assert order[:2] == [HIGH, HIGH_LONG]
    assert order[2 : TENANTS + 2] == [*REFITS[3:], *REFITS[:3]]
    assert order[TENANTS + 2 :] == list(LONGS)
    order = take_turns(order, REFITS[5], name=str)  # the rest keep their turns
    assert order[2 : TENANTS + 2] == [*REFITS[6:], *REFITS[:6]]
    assert take_turns(order, HIGH, name=str) == order
    assert take_turns(order, HIGH_LONG, name=str) == order
    light = take_turns(list(LIGHT), LONGS[1], name=str)  # a lane it does not serve: unchanged
    assert light == list(LIGHT)


def test_a_quick_first_refit_does_not_keep_a_campaign_grown_by_an_import_in_the_short_lane(
    make_body, bare_store
):
    """The lane follows the work now: a refit's time is scaled from the labels it ran on to the
    labels there are (an import of 1,500 after a 0.4 s refit on 3 is a long refit); a time
    measured on as many labels as now still decides against a pessimistic estimate."""
    settings = Settings()
    small, big = _spec(make_body), _spec(make_body, mcmc=BIG)
    campaign = bare_store.campaigns.create(make_body(max_labels=2000))["id"]
    spec = bare_store.campaigns.spec(campaign)
    bare_store.r.hset(
        f"fbgp:c:{campaign}:state", mapping={"model_version": 3, "last_refit_seconds": 0.4}
    )
    labels = f"fbgp:c:{campaign}:labels"
    bare_store.r.rpush(labels, *['{"x": [1.0], "y": 0.0}'] * 4)
    assert lane(spec, bare_store.refits._refit_job(campaign, spec)[1]) == REFIT  # 4 labels: quick
    bare_store.r.rpush(labels, *['{"x": [1.0], "y": 0.0}'] * 1496)
    assert lane(spec, bare_store.refits._refit_job(campaign, spec)[1]) == LONG  # was REFIT: 0.4 s
    bare_store.campaigns.delete(campaign)
    assert long_refit(small, 1500, 0.4, settings, last_n=3)
    assert not long_refit(small, 4, 0.4, settings, last_n=3)  # one more label: still quick
    assert not long_refit(big, 3, 1.0, settings, last_n=3)  # measured quick: quick
    assert long_refit(small, 3, settings.long_refit_seconds + 1, settings, last_n=3)


def test_the_stacks_model_calls_hold_at_most_their_share_of_the_workers(
    client, make_body, redis_url
):
    """Across campaigns, model calls out at once are at most model_call_share of the workers
    (at least one): one more is 503 with Retry-After until one ends; a page's plots are
    bounded per campaign, not by the share."""
    store = CampaignStore(Redis.from_url(redis_url))
    ids = [client.post("/campaigns", json=make_body(max_labels=10)).json()["id"] for _ in "ab"]
    for campaign in ids:
        label_design(client, campaign, [0.1, 0.4, -0.3])
        wait_for_model(client, campaign, 3)
    now = time.time()
    share = max(1, int(Worker.count(connection=store.r) * Settings().model_call_share))
    others = [f"short:other-{i}" for i in range(share)]  # other campaigns' calls, out now
    for member in others:
        assert store.jobs.admit_short(ids[0], member, now, now + 60, 100, share) == 1
    assert store.jobs.admit_short(ids[1], "short:one-more", now, now + 60, 100, share) == -2
    r = client.post(f"/campaigns/{ids[1]}/predict", json={"x": [[1.0]]})
    assert r.status_code == 503 and "Retry-After" in r.headers, r.text
    assert "model_call_share" in r.json()["detail"]
    assert client.get(f"/campaigns/{ids[1]}/plots/curve.png").status_code in (200, 404)
    store.jobs.forget(ids[0], others)
    assert client.post(f"/campaigns/{ids[1]}/predict", json={"x": [[1.0]]}).status_code == 200
    assert store.r.zcard("fbgp:shorts") == 0  # the answered call's note is gone


def test_job_alive_sees_dropped_queue_entries_and_silent_workers(settings):
    """A queued job must be in its queue, a started one on a worker that still beats; else the
    campaign's refit is revived (a Redis killed mid-dequeue, a worker killed mid-job). A job a
    worker has just taken off the queue is alive until its work horse starts it."""
    from rq import Worker

    from fbgp_al.service import queues
    from fbgp_al.service.queues import REFIT, job_alive

    redis = Redis.from_url(settings.redis_url.rsplit("/", 1)[0] + "/14")  # no worker serves it
    queue = queues.queue(REFIT, redis)
    job = queue.enqueue_call("fbgp_al.service.jobs.refit", args=("c",), job_id="refit-1")
    assert job_alive(redis, "refit-1")
    # a worker's dequeue: off the queue, but its work horse has not started it yet
    assert Queue.dequeue_any([queue], None, connection=redis)[0].id == "refit-1"
    assert job.get_status() == "queued" and queue.get_job_position("refit-1") is None
    assert job_alive(redis, "refit-1")
    transit = queue.intermediate_queue
    redis.set(transit.get_first_seen_key("refit-1"), time.time() - 61)  # it never starts
    assert not job_alive(redis, "refit-1")
    transit.remove("refit-1")  # taken off the queue, and off the way to a worker
    assert not job_alive(redis, "refit-1")
    worker = Worker([queue], connection=redis, name="beating")
    worker.register_birth()
    job.set_status("started")
    job.worker_name = "beating"
    job.save()
    assert job_alive(redis, "refit-1")
    redis.hset(worker.key, "last_heartbeat", "2020-01-01T00:00:00.000000Z")  # silent since
    assert not job_alive(redis, "refit-1")
    assert not job_alive(redis, "no-such-job")
    redis.flushdb()


def test_job_alive_sees_a_job_started_between_its_looks(settings, monkeypatch):
    """The status is read first, then the queue and the way to a work horse: a job a worker
    took and started in between is on neither, and its status says queued no longer. It is
    alive (judged dead, its refit would be enqueued again and the running one superseded)."""
    from rq import Worker

    from fbgp_al.service import queues
    from fbgp_al.service.queues import REFIT, job_alive

    redis = Redis.from_url(settings.redis_url.rsplit("/", 1)[0] + "/14")  # no worker serves it
    queue = queues.queue(REFIT, redis)
    job = queue.enqueue_call("fbgp_al.service.jobs.refit", args=("c",), job_id="refit-2")
    worker = Worker([queue], connection=redis, name="starts-it")
    worker.register_birth()
    position = Queue.get_job_position

    def taken_and_started(self, job_id):
        """A worker dequeues the job and its work horse starts it, right after the status was
        read: off the queue, off the way to the work horse, started."""
        assert Queue.dequeue_any([queue], None, connection=redis)[0].id == job_id
        queue.intermediate_queue.remove(job_id)
        job.set_status("started")
        job.worker_name = "starts-it"
        job.save()
        monkeypatch.setattr(Queue, "get_job_position", position)
        return position(self, job_id)

    monkeypatch.setattr(Queue, "get_job_position", taken_and_started)
    assert job_alive(redis, "refit-2")
    assert queues.job_facts(redis, "refit-2").alive
    redis.flushdb()


def test_a_job_that_starts_while_it_is_canceled_is_stopped_not_a_500(redis_url):
    """A DELETE answered 500 when a worker took one of the campaign's jobs between the look at
    its status (queued) and the cancel: RQ 3's cancel then raises ValueError (the run's
    execution record is not there yet). The job is taken off its queue and stopped instead."""
    from fbgp_al.service.queues import _cancel

    connection = Redis.from_url(redis_url)
    nobody = queue(f"fbgp-test-nobody-{time.time_ns()}", connection)
    job = nobody.enqueue_call("fbgp_al.service.jobs.refit", args=("gone",))
    job.set_status(JobStatus.STARTED)  # as the worker that took it left it, before its record
    connection.zadd(job.execution_registry.key, {"not-yet": time.time() + 600})
    with pytest.raises(ValueError):
        fetch_job(job.id, connection).cancel()  # what RQ does
    assert nobody.count == 1
    _cancel(connection, job)
    assert nobody.count == 0
    nobody.delete(delete_jobs=True)


def test_a_job_stored_under_a_former_name_runs_as_the_job_of_today(client, make_body, settings):
    """A job an earlier version stored names its function as that version did: ``worker.jobs.X``
    before the one import name, ``fbgp_al.worker.jobs.X`` while the jobs lived in worker/. It is
    read as ``fbgp_al.service.jobs.X``, and a worker runs it; a former name that names no job
    (a module of the jobs, a name of their module's) is refused."""
    from rq.serializers import JSONSerializer

    from fbgp_al.service.queues import FORMER_NAMES, JOBS, Refused

    assert set(FORMER_NAMES.values()) == set(JOBS)
    assert all(job.startswith("fbgp_al.service.jobs.") for job in JOBS)
    redis = Redis.from_url(settings.redis_url)
    campaign = client.post("/campaigns", json=make_body()).json()["id"]
    stored = Queue(HIGH, connection=redis, serializer=JSONSerializer)  # as an earlier version
    for former in ("worker.jobs", "fbgp_al.worker.jobs", "fbgp_al.service.jobs"):
        job = stored.enqueue_call(f"{former}.plot", args=[campaign, "curve"])
        assert fetch_job(job.id, redis).func_name == "fbgp_al.service.jobs.plot"
        deadline = time.monotonic() + 60
        while job.get_status(refresh=True) != JobStatus.FINISHED:
            assert job.get_status() != JobStatus.FAILED, former
            assert time.monotonic() < deadline, (former, job.get_status())
            time.sleep(0.05)
    nobody = Queue(
        f"fbgp-test-nobody-{time.time_ns()}", connection=redis, serializer=JSONSerializer
    )
    for foreign in ("worker.jobs.fanout", "fbgp_al.worker.jobs.base64", "worker.jobs.log_ids"):
        job = nobody.enqueue_call(foreign, args=[campaign])
        with pytest.raises(Refused):
            fetch_job(job.id, redis).func_name  # noqa: B018
    nobody.delete(delete_jobs=True)


POINTS = [[0.6], [1.1], [1.7], [2.3]]


def test_a_campaigns_next_refit_waits_behind_other_campaigns(client, make_body):
    """A's refit runs while B's queues and A's labels keep coming: A's next refit queues behind
    B's. The scenario needs A's first refit to read its four labels before the next arrive; on
    a loaded machine the worker may read all eight at once (one model, nothing to starve B
    of), and the scenario is set up again, at most three times."""
    mcmc = {"chains": 2, "warmup": 150, "samples": 100, "thinning": 5}

    def add(campaign, x, y):
        r = client.post(f"/campaigns/{campaign}/observations", json={"x": x, "y": y})
        assert r.status_code == 201

    def wait(campaign, field, until):
        deadline = time.monotonic() + 120
        while not until(client.get(f"/campaigns/{campaign}").json()[field]):
            assert time.monotonic() < deadline
            time.sleep(0.02)

    def models(campaign):
        history = client.get(f"/campaigns/{campaign}/history").json()
        return [(e["version"], e["at"]) for e in history if e["event"] == "model"]

    for _ in range(3):
        a = client.post("/campaigns", json=make_body(max_labels=20, mcmc=mcmc)).json()["id"]
        b = client.post("/campaigns", json=make_body(max_labels=20, mcmc=mcmc)).json()["id"]
        add(a, POINTS, [0.1, 0.3, -0.2, 0.5])
        # A's first refit starts (the worker may finish other tests' jobs first)
        wait(a, "refit", lambda phase: phase != "queued")
        add(b, POINTS, [0.1, 0.3, -0.2, 0.5])  # B's first refit queues
        for k in range(4):  # A keeps getting labels: its next refit queues behind B's
            add(a, [[0.9 + 0.3 * k]], [0.2 * k])
        wait(a, "model_version", lambda version: version == 8)
        wait(b, "model_version", lambda version: version == 4)
        if models(a)[0][0] == 4:  # A's first refit read its first four labels only
            break
    models_a = models(a)
    times_a, times_b = [t for _, t in models_a], [t for _, t in models(b)]
    assert models_a[0][0] == 4, models_a
    assert times_b[0] < times_a[-1]  # B was not starved by A's stream of labels
    assert len(times_a) <= 3  # A's four labels were coalesced, not four more refits
