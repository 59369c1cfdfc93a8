"""The RQ jobs (:mod:`service.jobs`), run by an RQ worker in this process (``SimpleWorker``) on a
store that no other worker serves: a refit stores the model of its campaign's labels with its
ranking and history; a prediction answers from that model; a refit no longer in charge of its
campaign (another was enqueued in its place) writes nothing."""

import json
import time

import numpy as np
from rq import SimpleWorker

from fbgp_al.service import keys
from fbgp_al.service.queues import QUEUES, SERIALIZER, PlainJob, enqueue_short, fetch_job, queue
from fbgp_al.service.schemas.campaigns import CampaignCreate

MCMC = {"chains": 2, "warmup": 30, "samples": 20, "thinning": 2}
X, Y = [[0.6], [1.1], [1.7], [2.3]], [0.1, -0.2, 0.5, 2.0]


def _work(store) -> None:
    """Every job queued on the store's database, run here, until none is left."""
    queues = [queue(name, store.r) for name in QUEUES]
    worker = SimpleWorker(queues, connection=store.r, serializer=SERIALIZER, job_class=PlainJob)
    worker.work(burst=True, with_scheduler=False, logging_level="WARNING")


def _campaign(store, make_body) -> str:
    body = make_body(mcmc=MCMC, max_labels=10)
    return store.campaigns.create(CampaignCreate(**body).model_dump())["id"]


def _import(store, campaign: str, x: list, y: list) -> int:
    """Labels imported as the API's import does: stored, and the refit they make due put on
    the queue; the labels after them."""
    _, n, due = store.labels.import_observations(campaign, x, y, time.time())
    store.refits.requested(campaign, due)
    return n


def test_a_refit_stores_the_model_that_a_prediction_answers_from(bare_store, make_body):
    store = bare_store
    campaign = _campaign(store, make_body)
    assert _import(store, campaign, X, Y) == 4
    assert store.campaigns.state(campaign)["refit"] == "queued"
    _work(store)
    state = store.campaigns.state(campaign)
    assert state["model_version"] == "4" and state["refit"] == "idle", state
    model = store.models.latest(campaign)
    assert model["version"] == 4 and len(model["samples"]["noise"]) == 2 * 20
    assert store.models.ranking(campaign) and [
        e["event"] for e in store.history.read(campaign)
    ] == ["model"]
    job = enqueue_short(store.r, "predict", campaign, [[1.0], [2.0]])
    _work(store)
    answer = fetch_job(job.id, store.r).return_value()
    assert answer["model_version"] == 4 and len(answer["mean"]) == 2
    assert all(v > 0 for v in answer["variance"])


def test_a_refit_no_longer_in_charge_writes_nothing(bare_store, make_body):
    store = bare_store
    campaign = _campaign(store, make_body)
    _import(store, campaign, X, Y)
    job_id = store.campaigns.state(campaign)["refit_job"]
    # taken for dead and revived elsewhere: another refit is in charge now
    store.r.hset(keys.campaign(campaign, "state"), "refit_job", "another-refit")
    _work(store)
    assert "skipped" in fetch_job(job_id, store.r).return_value()
    assert (
        store.campaigns.state(campaign).get("model_version") is None
        and store.history.read(campaign) == []
    )


def test_a_run_that_fails_while_the_posterior_is_sampled_counts_in_the_ranking_it_makes(
    bare_store, make_body, monkeypatch
):
    """The failure model is fitted on the failed runs read with the candidates, after the
    sampling: a run that failed meanwhile (written here as the store keeps one) is in the
    model the refit stores, and its point and the points near it leave the ranking."""
    from fbgp_al.worker import fitting

    store = bare_store
    campaign = _campaign(store, make_body)
    _import(store, campaign, X, Y)
    failed = {"x": [2.45], "index": None, "ticket": "t-failed", "reason": "diverged", "at": 0.0}
    sample = fitting.sample

    def sample_then_a_run_fails(*args, **kwargs):
        sampled = sample(*args, **kwargs)
        failed["at"] = time.time()
        store.r.rpush(keys.campaign(campaign, "failures"), json.dumps(failed))
        return sampled

    monkeypatch.setattr(fitting, "sample", sample_then_a_run_fails)
    _work(store)
    model = store.models.latest(campaign)
    assert model["version"] == 4
    assert model["failures"]["n_failures"] == 1 and model["failures"]["n_successes"] == 4
    assert all(abs(entry["x"][0] - 2.45) > 0.05 for entry in store.models.ranking(campaign))


def test_a_large_campaign_s_refit_draws_from_the_laplace_mixture_in_one_job(bare_store, make_body):
    """Past ``laplace_from`` a refit job draws from the mixture itself (no chain groups to fan
    out), stores its diagnostics, and the next refit starts from its modes."""
    store = bare_store
    mcmc = {**MCMC, "laplace_from": 30}
    campaign = store.campaigns.create(
        CampaignCreate(**make_body(mcmc=mcmc, max_labels=60)).model_dump()
    )["id"]
    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 2.5, 41)
    y = np.sin(4 * x) + 0.05 * rng.standard_normal(41)
    _import(store, campaign, x[:40, None].tolist(), y[:40].tolist())
    _work(store)
    first = store.models.latest(campaign)
    assert first["diagnostics"]["method"] == "laplace", first["diagnostics"]
    assert first["diagnostics"]["chain_groups"] == 1 and first["adaptation"]["source"] == "laplace"
    _import(store, campaign, [[float(x[40])]], [float(y[40])])
    _work(store)
    second = store.models.latest(campaign)
    assert second["version"] == 41 and second["diagnostics"]["warm_start"] == "warm"
    # a count (2 chains x 20, every 2nd): as many draws scored as NUTS's would be, all of them
    assert len(second["acquisition_samples"]["noise"]) == len(second["samples"]["noise"]) == 20
    assert [e["event"] for e in store.history.read(campaign)] == ["model", "model"]


def test_a_refit_reads_the_workers_with_its_candidates_only_when_its_scoring_may_be_split():
    """The candidates' read brings the workers only for a scoring worth parts: candidates x
    draws x n^2 (one output, or each of several) past fanout.SHARE_MIN_WORK, and more
    candidates than one part."""
    from fbgp_al.service import jobs

    body = CampaignCreate.model_validate(
        {
            "inputs": [{"name": "x", "lower": 0.0, "upper": 1.0}],
            "max_labels": 500,
            "pool": {"type": "grid", "points_per_dim": 20_001},
            "pool_subsample": 10_000,
            "mcmc": {"chains": 5, "warmup": 200, "samples": 300, "thinning": 10},
        }
    )
    spec = body.model_dump()
    assert jobs._may_share(spec, 200)  # 10,000 x 150 draws x 200^2
    assert not jobs._may_share(spec, 10)  # 10,000 x 150 x 10^2: all of it in the refit
    assert not jobs._may_share({**spec, "pool_subsample": 1000}, 200)  # one part's worth
    two = {**spec, "outputs": [{"name": "a"}, {"name": "b"}]}
    assert jobs._may_share(two, 26) and not jobs._may_share(spec, 26)  # each output scores
