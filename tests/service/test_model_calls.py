"""A model call's story (:mod:`service.model_calls`) on a store no worker serves: a call about no
campaign is NotFound; one no worker takes within its wait is Busy with the Retry-After asked
for, its job stopped and its note among the campaign's and the stack's jobs forgotten; a call
beyond the campaign's limit is TooMany."""

import time

import pytest

from fbgp_al.service import keys, model_calls
from fbgp_al.service.keys import SHORTS
from fbgp_al.service.queues import HIGH
from fbgp_al.service.refusals import Busy, NotFound, TooMany


def test_a_call_about_no_campaign_is_not_found(bare_store):
    with pytest.raises(NotFound):
        model_calls.run_short(
            bare_store, "predict", "no-such-campaign", [[0.5]], wait_seconds=1, retry_after=2
        )


def test_a_call_no_worker_takes_is_busy_stopped_and_forgotten(bare_store, make_body):
    campaign = bare_store.campaigns.create(make_body())["id"]
    began = time.monotonic()
    with pytest.raises(Busy) as busy:
        model_calls.run_short(
            bare_store, "predict", campaign, [[0.5]], wait_seconds=0.5, retry_after=3
        )
    assert time.monotonic() - began < 30
    assert busy.value.retry_after == 3
    assert "no worker answered the predict job" in busy.value.detail
    assert bare_store.r.zcard(SHORTS) == 0
    assert bare_store.r.zcard(keys.campaign(campaign, "jobs")) == 0
    assert bare_store.r.llen(f"rq:queue:{HIGH}") == 0  # the job no worker took is canceled


def test_a_call_beyond_the_campaigns_limit_is_too_many(bare_store, make_body, monkeypatch):
    campaign = bare_store.campaigns.create(make_body())["id"]
    now = time.time()
    limit = model_calls.get_settings().limit_model_calls
    out = [f"short:held-{i}" for i in range(limit)]
    for member in out:
        assert bare_store.jobs.admit_short(campaign, member, now, now + 60, limit) == 1
    with pytest.raises(TooMany) as too_many:
        model_calls.run_short(
            bare_store, "predict", campaign, [[0.5]], wait_seconds=0.5, retry_after=3
        )
    assert too_many.value.retry_after == 1
    bare_store.jobs.forget(campaign, out)


def test_indices_still_computing_go_on_and_the_next_ask_waits_for_them(
    bare_store, make_body, monkeypatch
):
    """A ``/sensitivity`` past its wait is Busy but its job is not stopped (its answer is kept
    for the model, :mod:`service.jobs.calls`): a second ask while it runs waits for that job
    rather than starting another, and the indices are computed once."""
    import threading

    from rq import SimpleWorker

    from fbgp_al.service.jobs import calls
    from fbgp_al.service.queues import QUEUES, SERIALIZER, PlainJob, queue
    from fbgp_al.service.schemas.campaigns import CampaignCreate
    from tests.service.jobs.test_calls import INPUTS, _labels
    from tests.service.jobs.test_jobs import _import, _work

    store = bare_store
    body = make_body(inputs=INPUTS, pool={"type": "grid", "points_per_dim": 11}, max_labels=20)
    campaign = store.campaigns.create(CampaignCreate(**body).model_dump())["id"]
    _import(store, campaign, *_labels(8))
    _work(store)
    computed = []
    real = calls.sensitivity_outputs

    def slow(*args, **options):
        computed.append(options)
        time.sleep(1.5)
        return real(*args, **options)

    monkeypatch.setattr(calls, "sensitivity_outputs", slow)
    answers = {}

    def ask(name: str, wait: float) -> None:
        try:
            answers[name] = model_calls.run_short(
                store,
                "sensitivity",
                campaign,
                "closed-form",
                0.95,
                wait_seconds=wait,
                retry_after=7,
            )
        except Busy as busy:
            answers[name] = busy

    first = threading.Thread(target=ask, args=("first", 0.4))
    second = threading.Timer(0.8, ask, args=("second", 10.0))
    first.start()
    second.start()
    time.sleep(0.1)  # the first ask's job is queued
    worker = SimpleWorker(
        [queue(q, store.r) for q in QUEUES],
        connection=store.r,
        serializer=SERIALIZER,
        job_class=PlainJob,
    )
    worker.work(burst=True, with_scheduler=False, logging_level="WARNING")
    first.join()
    second.join()
    assert isinstance(answers["first"], Busy) and answers["first"].retry_after == 7
    assert "still computing" in answers["first"].detail
    assert answers["second"]["model_version"] == 8 and len(answers["second"]["first"]["mean"]) == 2
    assert len(computed) == 1
    assert store.r.llen(f"rq:queue:{HIGH}") == 0  # the second ask started no job of its own
