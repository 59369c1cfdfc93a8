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
