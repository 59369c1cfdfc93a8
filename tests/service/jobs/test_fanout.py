"""A refit's work fanned out over idle workers (:mod:`service.jobs.fanout`). Its candidates split
into parts scored on other workers; with two workers its chains run as two jobs and a merge,
reproducibly; its scoring is shared with idle workers, part by part, and never lost to one that
does not take its part or dies with it; a light worker takes a long refit's scoring parts; a big
refit's chains leave a worker to a campaign whose simulator is out. Chain
groups of one refit on several workers give the draws of one process running every chain, bit
for bit: each chain's numbers do not depend on its group (its own random streams, a potential
computed row by row), and the groups judge the sampling target at each check on all the chains
together (:meth:`worker.convergence.Target.more_of`), telling each other where they are through
Redis (:class:`service.jobs.fanout.Peers`, a real redis-server)."""

import json
import random
import threading
import time

import numpy as np
import pytest
import torch
from redis import Redis
from rq.job import JobStatus
from rq.registry import FinishedJobRegistry

from fbgp_al.service import jobs, keys, queues
from fbgp_al.service.jobs import fanout
from fbgp_al.service.jobs.fanout import aligned_parts
from fbgp_al.service.queues import REFIT
from fbgp_al.service.store import CampaignStore
from fbgp_al.worker import fitting
from fbgp_al.worker.gp import SCORE_ALIGN
from fbgp_al.worker.mcmc import Posterior, Target, assemble, run_chains
from fbgp_al.worker.nuts import Draws
from fbgp_al.worker.scoring import Output, Scoring
from tests.service.conftest import label_design, wait_for_model
from tests.worker.test_mcmc import DATASETS, _data


@pytest.mark.parametrize(
    "m,parts",
    [
        (1, 3),
        (700, 2),
        (5000, 3),
        (10_000, 2),
        (10_000, 7),
        (3 * SCORE_ALIGN, 3),
        (3 * SCORE_ALIGN + 1, 4),
    ],
)
def test_parts_cover_every_candidate_once_and_start_at_the_alignment(m, parts):
    pieces = aligned_parts(m, parts)
    assert np.array_equal(np.concatenate(pieces), np.arange(m))
    assert 1 <= len(pieces) <= parts and all(len(p) for p in pieces)
    assert all(p[0] % SCORE_ALIGN == 0 for p in pieces)
    if m >= parts * SCORE_ALIGN:  # room for every part: about equal (whole blocks, the last cut)
        sizes = [len(p) for p in pieces]
        assert len(pieces) == parts and max(sizes) - min(sizes) < 2 * SCORE_ALIGN


def _model_after_import(client, make_body):
    body = make_body(max_labels=10, mcmc={"chains": 4, "warmup": 40, "samples": 30, "thinning": 3})
    campaign = client.post("/campaigns", json=body).json()["id"]
    x, y = [[0.6], [1.1], [1.7], [2.3]], [0.1, -0.2, 0.5, 2.0]
    assert (
        client.post(f"/campaigns/{campaign}/observations", json={"x": x, "y": y}).status_code == 201
    )
    deadline = time.monotonic() + 120
    while client.get(f"/campaigns/{campaign}").json()["model_version"] != 4:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return client.get(f"/campaigns/{campaign}/model").json()


def test_chains_are_split_over_two_workers_and_reproducible(
    client, make_body, second_worker, redis_url
):
    first = _model_after_import(client, make_body)
    second = _model_after_import(client, make_body)
    for model in (first, second):
        assert model["diagnostics"]["chain_groups"] == 2 and model["chains"] == 4
        assert len(model["samples"]["noise"]) == 4 * 30
    # the same seed: the same draws, whichever worker ran which group, and those of one
    # process running every chain (worker.fitting.posterior)
    assert first["samples"] == second["samples"]
    store = CampaignStore(Redis.from_url(redis_url))
    campaign = client.get("/campaigns").json()[-1]["id"]
    spec, labels = store.campaigns.spec(campaign), store.labels.all(campaign)
    alone = fitting.posterior(spec, fitting.prepare(spec, labels), None)
    assert (
        alone.to_dict()["samples"] == first["samples"]
        and alone.mode_noise == first["mode"]["noise"]
    )
    # a split refit's seconds run from its start, its groups included, to its model
    event = next(
        e for e in client.get(f"/campaigns/{campaign}/history").json() if e["event"] == "model"
    )
    assert abs((event["at"] - event["started_at"]) - event["refit_seconds"]) < 0.5, event


def _jobs_of(redis, campaign: str, name: str) -> list:
    """The records of ``campaign``'s jobs of function ``name`` still in Redis."""
    found = []
    for key in redis.scan_iter("rq:job:*"):
        job_id = key.decode().split(":")[2]
        if key.decode().count(":") != 2:
            continue
        try:
            job = queues.fetch_job(job_id, redis)
            if job.func_name == name and job.args[0] == campaign:
                found.append(job)
        except Exception:  # gone meanwhile, or not one of ours
            continue
    return found


def test_results_live_as_long_as_their_reader_needs_them(
    client, make_body, second_worker, redis_url
):
    """A split refit's chain groups' draws go once its merge has read them (kept an hour, they
    held Redis's memory for nobody), and a model call's answer once the API has read it; the
    refit's and its merge's results, which nobody reads, are kept a minute."""
    from fbgp_al.service.job_results import READ_TTL, REFIT_RESULT_TTL

    redis = Redis.from_url(redis_url)
    model = _model_after_import(client, make_body)
    assert model["diagnostics"]["chain_groups"] == 2
    campaign = client.get("/campaigns").json()[-1]["id"]
    r = client.post(f"/campaigns/{campaign}/predict", json={"x": [[1.0], [2.0]]})
    assert r.status_code == 200, r.text
    merge = _jobs_of(redis, campaign, "fbgp_al.service.jobs.refit_merge")
    assert len(merge) == 1 and 0 < redis.ttl(merge[0].key) <= REFIT_RESULT_TTL
    groups = merge[0].args[2]
    assert len(groups) == 2
    time.sleep(READ_TTL + 1.5)
    for job_id in groups:
        assert not redis.exists(f"rq:job:{job_id}", f"rq:results:{job_id}"), job_id
    assert _jobs_of(redis, campaign, "fbgp_al.service.jobs.refit_chains") == []
    assert _jobs_of(redis, campaign, "fbgp_al.service.jobs.predict") == []


def _scoring(n=200, draws=150, m=8000, seed=0):
    g = torch.Generator().manual_seed(seed)
    d = torch.float64
    u = torch.rand(n, 6, generator=g, dtype=d)
    z = torch.sin(3 * u).sum(1)
    post = Posterior(
        lengthscale=torch.exp(torch.randn(draws, 6, generator=g, dtype=d) * 0.2),
        noise=torch.full((draws,), 0.01, dtype=d),
        chains=5,
        mode_lengthscale=torch.ones(6, dtype=d),
        mode_noise=0.01,
    )
    scoring = Scoring("qb-mgp", (Output(1.0, post, u, z, None, 0),))
    return scoring, torch.rand(m, 6, generator=g, dtype=d)


def test_a_refits_scoring_is_shared_with_an_idle_worker(redis_url, second_worker):
    """Two idle workers (no job here holds one): the candidates split into two parts, one
    scored here and one by a worker; the scores are those of one process."""
    connection = Redis.from_url(redis_url)
    finished = FinishedJobRegistry(REFIT, connection=connection)

    def new_jobs() -> set[str]:  # finished since: other tests' jobs only leave as they expire
        return set(finished.get_job_ids()) - before

    before = set(finished.get_job_ids())
    # half the candidates of _scoring's default: still two parts worth a job each, the second
    # starting at 2 x SCORE_ALIGN, inside the candidates
    fn, candidates = _scoring(m=4000)
    store = CampaignStore(connection)
    workforce = store.jobs.workforce(time.time())
    share = jobs.share_scoring(store, "none", 150 * 200**2, 120, workforce)
    scores = share(fn, candidates)
    # the parts start where one process's chunks do: the same bits, in the same order
    assert scores.numpy().tobytes() == fn(candidates).numpy().tobytes()
    assert len(ran := new_jobs()) == 1  # the other part ran on a worker
    # too little work to be worth a job: all of it here
    small = jobs.share_scoring(store, "none", 1.0, 120, workforce)
    torch.testing.assert_close(small(fn, candidates[:600]), fn(candidates[:600]))
    assert new_jobs() == ran


def test_a_scoring_is_split_only_when_worth_it_and_the_workers_were_read():
    from fbgp_al.service.store.jobs import Hand, Workforce

    hands = tuple(Hand(f"w{k}", frozenset({REFIT}), "idle") for k in range(3))
    idle = Workforce(hands, 0, frozenset())  # three idle, none waiting, no other campaign
    work = fanout.SHARE_MIN_WORK / 2000
    assert fanout.may_share(2048, work) and not fanout.may_share(1900, work)
    assert not fanout.may_share(SCORE_ALIGN, 1e12)  # one part's worth of candidates
    assert [len(p) for p in fanout.scoring_parts(3000, work, idle, "c", REFIT)] == [1024] * 2 + [
        952
    ]
    assert fanout.scoring_parts(3000, work, None, "c", REFIT) is None  # workers not read
    assert fanout.scoring_parts(1900, work, idle, "c", REFIT) is None


@pytest.fixture
def nobody(redis_url):
    """A queue that no worker serves."""
    queue = queues.queue(f"fbgp-test-nobody-{time.time_ns()}", Redis.from_url(redis_url))
    yield queue
    queue.delete(delete_jobs=True)


def test_a_part_no_worker_took_is_taken_back_and_scored_here(nobody):
    fn, candidates = _scoring(n=20, m=50)
    job = nobody.enqueue_call("fbgp_al.service.jobs.score_part", args=("fbgp:scoring:none", 0))
    scores = fanout._part(nobody, job, 60.0, lambda: fn(candidates))
    torch.testing.assert_close(scores, fn(candidates))
    assert nobody.count == 0  # off the queue: no worker will score it later


def test_a_part_whose_worker_went_silent_is_scored_here_after_the_patience(nobody):
    fn, candidates = _scoring(n=20, m=50)
    job = nobody.enqueue_call("fbgp_al.service.jobs.score_part", args=("fbgp:scoring:none", 0))
    nobody.remove(job)
    job.set_status(JobStatus.STARTED)  # as a worker that took it and died leaves it
    t = time.monotonic()
    scores = fanout._part(nobody, job, 0.5, lambda: fn(candidates))
    assert time.monotonic() - t >= 0.5
    torch.testing.assert_close(scores, fn(candidates))
    job.set_status(JobStatus.FAILED)  # as a failed part: scored here at once
    t = time.monotonic()
    fanout._part(nobody, job, 60.0, lambda: fn(candidates))
    assert time.monotonic() - t < 5


def test_a_long_refits_scoring_parts_go_where_light_workers_take_them(redis_url, second_worker):
    """A light worker (``fbgp-al worker --light``) never takes a long refit, nor its chain
    groups; it takes the parts of a long refit's scoring, which go to the ordinary refits'
    queue."""
    import signal

    from rq import Worker

    from fbgp_al.service.queues import LONG, ordinary
    from tests.conftest import start_worker

    assert ordinary(LONG) == REFIT and ordinary(REFIT) == REFIT  # where scoring parts go
    connection = Redis.from_url(redis_url)
    light = start_worker(redis_url, None, "--light")
    try:
        deadline = time.monotonic() + 120
        while not (
            len(Worker.all(connection=connection)) == 3
            and all(w.get_state() == "idle" for w in Worker.all(connection=connection))
        ):
            assert light.poll() is None and time.monotonic() < deadline, "no light worker"
            time.sleep(0.1)
        store = CampaignStore(connection)
        # outside a job (no worker of its own): this one and the idle workers of the queue, at
        # most as many as serve it
        workforce = store.jobs.workforce(time.time())
        assert fanout.free_workers(workforce, "none", LONG) == 2
        assert fanout.free_workers(workforce, "none", REFIT) == 3
    finally:
        light.send_signal(signal.SIGTERM)
        light.wait(timeout=60)


SPEC = {
    "inputs": [{"name": "x", "lower": 0.0, "upper": 1.0}],
    "pool_subsample": 20,
    "pool": {"type": "grid", "points_per_dim": 21},
    "acquisition": "qb-mgp",
    "seed": 3,
    "mcmc": {
        "chains": 5,
        "warmup": 60,
        "samples": 20,
        "thinning": 2,
        "draws": 150,
        "max_samples": 400,
        "warm_start": True,
        "init": "grid",
    },
}
GROUPINGS = {1: [[0, 1, 2, 3, 4]], 2: [[0, 1, 2], [3, 4]], 3: [[0, 1], [2, 3], [4]]}


@pytest.fixture
def connection(redis_url):
    with Redis.from_url(redis_url) as r:
        yield r


def _prepared(n=None):
    u, z = _data(*DATASETS["one-mode"])
    labels = [{"x": [float(a)], "y": float(b)} for a, b in zip(u[:, 0], z, strict=True)]
    return fitting.prepare(SPEC, labels[:n] if n else labels)


def _grouped(connection, data, groups, warm=None, delays=None) -> Draws:
    """The refit's chains run as ``groups``, each in a thread of its own (as on workers: each
    with its :class:`service.jobs.fanout.Peers`), started ``delays`` seconds apart; their draws put
    together as the merge does."""
    token = f"t{time.time_ns()}"
    results, errors = {}, []

    def run(i, ids):
        time.sleep((delays or [0.0] * len(groups))[i])
        try:
            peers = fanout.Peers(token, ids, SPEC["mcmc"]["chains"], poll=0.01)
            steps = fitting.grouped(SPEC, data, ids, warm)
            results[i] = jobs.judged(CampaignStore(connection), steps, peers)[0]
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i, ids)) for i, ids in enumerate(groups)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert not errors, errors
    return Draws.concatenate([results[i] for i in range(len(groups))])


def _same(a: Draws, b: Draws) -> None:
    for name in Draws.ARRAYS:
        assert getattr(a, name).tobytes() == getattr(b, name).tobytes(), name


@pytest.mark.parametrize("start", ["cold", "warm"])
def test_a_refit_split_over_1_2_and_3_groups_gives_the_same_bytes(connection, start):
    """One process, and 1, 2 and 3 groups: the same draws, adaptation and mode, to the bit,
    with the chains run on past their first 20 draws to the target (judged together)."""
    data = _prepared()
    warm = None
    if start == "warm":
        previous = fitting.posterior(SPEC, _prepared(len(data.z) - 1), None)
        warm = previous.adaptation
    alone, how = fitting.chains(SPEC, data, warm=warm)
    assert how == start and alone.theta.shape[1] > SPEC["mcmc"]["samples"]
    mode = assemble(alone, 1, 0.0, how, data.seed)
    for k, groups in GROUPINGS.items():
        merged = _grouped(connection, data, groups, warm)
        _same(merged, alone)
        post = assemble(merged, 1, 0.0, how, data.seed)
        assert post.mode_lengthscale.numpy().tobytes() == mode.mode_lengthscale.numpy().tobytes()
        assert post.mode_noise == mode.mode_noise, k


def test_groups_that_start_apart_still_give_one_process_draws(connection):
    """A group that starts late (its worker was busy): the others wait for it at their first
    check, and the draws are the same."""
    data = _prepared()
    alone, _ = fitting.chains(SPEC, data)
    _same(_grouped(connection, data, GROUPINGS[3], delays=[0.0, 1.5, 0.5]), alone)


def test_a_group_gives_up_when_another_never_starts_or_stops_short(connection):
    """The merge runs every chain itself when a group cannot judge the target on them all: a
    group that never started (after the patience) or one that stopped short of the check."""
    data = _prepared()
    token = f"t{time.time_ns()}"
    lonely = fanout.Peers(token, [0, 1, 2], 5, poll=0.01, patience=0.2)
    lonely.started = time.monotonic()  # its patience: 0.2 s, or twice its time so far
    store = CampaignStore(connection)
    with pytest.raises(fanout.PeersLost, match="started"):
        jobs.judged(store, fitting.grouped(SPEC, data, [0, 1, 2]), lonely)
    token = f"t{time.time_ns()}"
    failed = fanout.Peers(token, [3, 4], 5)
    store.groups.publish(token, failed.me, *failed.note(np.zeros((2, 5, 2)), False), 60)
    store.groups.say(token, failed.me, failed.abandoned())  # its sampling failed at 5 draws
    with pytest.raises(fanout.PeersLost, match="short"):
        jobs.judged(
            store, fitting.grouped(SPEC, data, [0, 1, 2]), fanout.Peers(token, [0, 1, 2], 5)
        )


def test_together_puts_every_chain_in_order_once_all_have_as_many(connection):
    token = f"t{time.time_ns()}"
    groups = CampaignStore(connection).groups
    a = fanout.Peers(token, [0, 1], chains=5, poll=0.01)
    b = fanout.Peers(token, [2, 3, 4], chains=5, poll=0.01)
    own, theirs = np.full((2, 30, 2), 1.0), np.full((3, 45, 2), 2.0)
    groups.publish(token, a.me, *a.note(own, stopped=False), fanout.PEERS_TTL)
    assert a.together(own, *groups.notes_and_draws(token)) is None  # b not heard yet
    groups.publish(token, b.me, *b.note(theirs, stopped=True), fanout.PEERS_TTL)
    together = a.together(own, *groups.notes_and_draws(token))  # b ahead and done: its first 30
    assert together.shape == (5, 30, 2)
    assert (together[:2] == 1.0).all() and (together[2:] == 2.0).all()
    assert all(0 < connection.ttl(k) <= fanout.PEERS_TTL for k in keys.chain_groups(token))


def test_a_waiting_group_says_again_that_it_is_there_and_wakes_when_another_speaks(connection):
    """A group waiting for the others refreshes its note every tenth of ``stale`` (it is not
    taken for dead), and stops waiting as soon as another group's note changes."""
    token = f"t{time.time_ns()}"
    store = CampaignStore(connection)
    a = fanout.Peers(token, [0], chains=2, stale=1.0, poll=0.01, patience=30.0)
    b = fanout.Peers(token, [1], chains=2, poll=0.01)
    store.groups.publish(token, a.me, *a.note(np.zeros((1, 5, 2)), stopped=False), 60)
    key = keys.chain_groups(token)[0]
    first = json.loads(connection.hget(key, a.me))["at"]

    def b_speaks():
        store.groups.publish(token, b.me, *b.note(np.zeros((1, 5, 2)), False), 60)

    threading.Timer(0.5, b_speaks).start()
    t = time.monotonic()
    jobs._wait(store.groups, a)
    assert 0.4 < time.monotonic() - t < 5  # woken by b, long before its patience
    assert json.loads(connection.hget(key, a.me))["at"] > first  # said again while it waited


def test_run_chains_takes_its_stopping_rule_from_more_when_given():
    u, z = _data(*DATASETS["one-mode"])
    calls = []

    def more(draws):
        calls.append(draws.theta.shape[1])
        return 10 if len(calls) == 1 else 0

    draws, _ = run_chains(u, z, [0, 1], 30, 20, 0, target=Target(draws=10**6), more=more)
    assert calls == [20, 30] and draws.theta.shape[1] == 30


def test_a_big_refit_leaves_a_worker_to_a_campaign_whose_simulator_is_out(
    client, make_body, second_worker
):
    """Two workers, both idle; B's simulator holds a ticket. A's long refit takes one worker,
    not both, so B's labels keep getting models while A refits (before, A's chains took both
    workers, and B's next model waited for one of A's chain groups)."""
    small = make_body(max_labels=40, pool={"type": "grid", "points_per_dim": 401})
    b = client.post("/campaigns", json=small).json()["id"]
    label_design(client, b, [0.1, 0.4, -0.3])
    wait_for_model(client, b, 3)
    ticket = client.get(f"/campaigns/{b}/next").json()["ticket"]  # B's simulator is out

    mcmc = {"chains": 4, "warmup": 2000, "samples": 8000, "thinning": 80}
    a = client.post("/campaigns", json=make_body(max_labels=20, mcmc=mcmc)).json()["id"]
    x = [[0.6 + 0.2 * k] for k in range(8)]
    r = client.post(f"/campaigns/{a}/observations", json={"x": x, "y": [0.3 * k for k in range(8)]})
    assert r.status_code == 201
    deadline = time.monotonic() + 60
    while client.get(f"/campaigns/{a}").json()["refit"] != "running":
        assert time.monotonic() < deadline
        time.sleep(0.02)

    rng = random.Random(0)
    while client.get(f"/campaigns/{a}").json()["model_version"] != 8:  # B labels meanwhile
        assert time.monotonic() < deadline + 120, "A's refit did not end"
        r = client.post(f"/campaigns/{b}/label", json={"ticket": ticket, "y": rng.gauss()})
        assert r.status_code == 201, r.text
        while True:
            r = client.get(f"/campaigns/{b}/next", params={"wait": 5})
            if r.status_code == 200 or client.get(f"/campaigns/{a}").json()["model_version"] == 8:
                break
        if r.status_code != 200:
            break
        ticket = r.json()["ticket"]

    model_a = client.get(f"/campaigns/{a}/model").json()
    assert model_a["diagnostics"]["chain_groups"] == 1  # its share: one of two workers
    refit_a = next(e for e in client.get(f"/campaigns/{a}/history").json() if e["event"] == "model")
    models_b = [e for e in client.get(f"/campaigns/{b}/history").json() if e["event"] == "model"]
    during = [e for e in models_b if refit_a["started_at"] < e["at"] < refit_a["at"]]
    # B never waited for A's chains: its longest wait for a model is a small part of A's refit
    times = [refit_a["started_at"]] + [e["at"] for e in during]
    longest = max(later - earlier for earlier, later in zip(times, times[1:], strict=False))
    assert len(during) >= 3 and longest < (refit_a["at"] - refit_a["started_at"]) / 4, during


def test_a_long_refits_chain_groups_go_where_light_workers_take_them_when_short():
    """A long refit's groups go to the ordinary lane when the previous sampling says a group of
    3 of 5 chains takes at most the long refits' bound; else, or with nothing to judge by, to
    the long lane; an ordinary refit's stay on the ordinary lane."""
    from fbgp_al.service.queues import LONG, LONGS, REFITS

    def model(seconds, n=200, groups=1):
        return {
            "n_labeled": n,
            "diagnostics": {"seconds": seconds, "chains": 5, "chain_groups": groups},
        }

    assert fanout.chain_lane(LONG, model(20.0), 201, 5, 15.0) == REFIT  # 4 s a chain, 12 s
    assert fanout.chain_lane(LONG, model(30.0), 201, 5, 15.0) == LONG  # 18 s
    assert fanout.chain_lane(LONG, model(15.0, groups=2), 201, 5, 15.0) == LONG  # 6 s a chain
    assert fanout.chain_lane(LONG, model(20.0, n=100), 200, 5, 15.0) == LONG  # 8x the work
    assert fanout.chain_lane(LONGS[3], model(5.0), 201, 5, 15.0) == REFITS[3]  # its tenant's
    assert fanout.chain_lane(LONG, None, 201, 5, 15.0) == LONG
    assert fanout.chain_lane(LONG, {"n_labeled": 3, "diagnostics": {}}, 4, 5, 15.0) == LONG
    assert fanout.chain_lane(REFIT, model(300.0), 201, 5, 15.0) == REFIT


def test_short_groups_queue_on_the_ordinary_lane_and_the_merge_on_the_refits(tmp_path, monkeypatch):
    """:func:`fanout.dispatch` with ``chains_queue``: the groups wait on that queue (where a
    light worker takes them), the merge, deferred until they end, on the refit's own (long)
    queue. A Redis of its own, with no worker to take them."""
    from fbgp_al.service.queues import LONG, queue
    from tests.conftest import start_redis, stop

    process, url = start_redis(tmp_path)
    try:
        r = Redis.from_url(url)
        monkeypatch.setattr(fanout, "lane", lambda: LONG)  # as inside a job of the long lane
        merge = fanout.dispatch(
            r, "c", 200, [[0, 1, 2], [3, 4]], None, "t", time.time(), chains_queue=REFIT
        )
        groups, own = queue(REFIT, r), queue(LONG, r)
        assert len(groups.job_ids) == 2 and own.job_ids == []
        assert own.deferred_job_registry.get_job_ids() == [merge]
        plain = fanout.dispatch(r, "d", 200, [[0, 1, 2], [3, 4]], None, "u", time.time())
        assert len(own.job_ids) == 2 and plain in own.deferred_job_registry.get_job_ids()
    finally:
        stop(process)
