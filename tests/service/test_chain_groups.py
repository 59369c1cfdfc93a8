"""With two workers a refit's chains run as two jobs and a merge; the result is reproducible.
A refit's scoring is shared with idle workers, part by part, and never lost to one that does
not take its part or dies with it."""

import time

import pytest
import torch
from redis import Redis
from rq.job import JobStatus
from rq.registry import FinishedJobRegistry

from service import queues
from service.queues import REFIT
from service.store import CampaignStore
from worker import fitting
from worker.jobs import fanout
from worker.mcmc import Posterior
from worker.scoring import Output, Scoring


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


def test_chains_are_split_over_two_workers_and_reproducible(client, make_body, second_worker,
                                                            redis_url):  # fmt: skip
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
    spec, labels = store.spec(campaign), store.labels(campaign)
    alone = fitting.posterior(spec, fitting.prepare(spec, labels), None)
    assert (
        alone.to_dict()["samples"] == first["samples"]
        and alone.mode_noise == first["mode"]["noise"]
    )
    # a split refit's seconds run from its start, its groups included, to its model
    event = next(e for e in client.get(f"/campaigns/{campaign}/history").json()
                 if e["event"] == "model")  # fmt: skip
    assert abs((event["at"] - event["started_at"]) - event["refit_seconds"]) < 0.5, event


def _scoring(n=200, draws=150, m=8000, seed=0):
    g = torch.Generator().manual_seed(seed)
    d = torch.float64
    u = torch.rand(n, 6, generator=g, dtype=d)
    z = torch.sin(3 * u).sum(1)
    post = Posterior(lengthscale=torch.exp(torch.randn(draws, 6, generator=g, dtype=d) * 0.2),
                     noise=torch.full((draws,), 0.01, dtype=d), chains=5,
                     mode_lengthscale=torch.ones(6, dtype=d), mode_noise=0.01)  # fmt: skip
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
    fn, candidates = _scoring()
    share = fanout.share_scoring(CampaignStore(connection), "none", 150 * 200**2, timeout=120)
    scores = share(fn, candidates)
    # the parts start where one process's chunks do: the same bits, in the same order
    assert scores.numpy().tobytes() == fn(candidates).numpy().tobytes()
    assert len(ran := new_jobs()) == 1  # the other part ran on a worker
    # too little work to be worth a job: all of it here
    small = fanout.share_scoring(CampaignStore(connection), "none", 1.0, timeout=120)
    torch.testing.assert_close(small(fn, candidates[:600]), fn(candidates[:600]))
    assert new_jobs() == ran


@pytest.fixture
def nobody(redis_url):
    """A queue that no worker serves."""
    queue = queues.queue(f"fbgp-test-nobody-{time.time_ns()}", Redis.from_url(redis_url))
    yield queue
    queue.delete(delete_jobs=True)


def test_a_part_no_worker_took_is_taken_back_and_scored_here(nobody):
    fn, candidates = _scoring(n=20, m=50)
    job = nobody.enqueue_call("worker.jobs.score_part", args=("fbgp:scoring:none", 0))
    scores = fanout._part(nobody, job, 60.0, lambda: fn(candidates))
    torch.testing.assert_close(scores, fn(candidates))
    assert nobody.count == 0  # off the queue: no worker will score it later


def test_a_part_whose_worker_went_silent_is_scored_here_after_the_patience(nobody):
    fn, candidates = _scoring(n=20, m=50)
    job = nobody.enqueue_call("worker.jobs.score_part", args=("fbgp:scoring:none", 0))
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

    from service.queues import LONG, ordinary
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
            time.sleep(0.1)  # fmt: skip
        store = CampaignStore(connection)
        # outside a job (no worker of its own): this one and the idle workers of the queue, at
        # most as many as serve it
        assert fanout.free_workers(store, "none", time.time(), LONG) == 2
        assert fanout.free_workers(store, "none", time.time(), REFIT) == 3
    finally:
        light.send_signal(signal.SIGTERM)
        light.wait(timeout=60)
