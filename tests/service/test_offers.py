"""``/next``'s story (:mod:`service.offers`) on a store no worker serves: the design's points
issued as tickets, as many as asked for and each once; the loop's answer instead of a ticket
when the design is out and no model can choose; a campaign whose lock another request holds
is Busy with the store's Retry-After once the lock's timeout has passed."""

import time

import pytest

from fbgp_al.service import loop
from fbgp_al.service.offers import offer
from fbgp_al.service.refusals import Busy
from fbgp_al.service.schemas.campaigns import CampaignCreate
from fbgp_al.service.settings import Settings


def _create(store, body: dict) -> str:
    return store.campaigns.create(CampaignCreate(**body).model_dump())["id"]


@pytest.fixture
def settings(redis_url):
    return Settings(redis_url=redis_url, lock_timeout_seconds=0.3, store_retry_after_seconds=4)


def test_the_design_is_issued_as_tickets_then_the_rules_answer(bare_store, make_body, settings):
    body = make_body(initial_design={"type": "maximin-lhs", "size": 3}, max_labels=10)
    campaign = _create(bare_store, body)
    now = time.time()
    first = offer(bare_store, campaign, now, settings, count=2)
    assert isinstance(first, list) and len(first) == 2
    second = offer(bare_store, campaign, now, settings, count=5)
    assert isinstance(second, list) and len(second) == 1  # the design's third point, alone
    tickets = first + second
    assert len({t.ticket for t in tickets}) == 3
    assert len({tuple(t.x) for t in tickets}) == 3
    # the design is out and no model exists: the loop's answer, not a ticket
    assert isinstance(offer(bare_store, campaign, now, settings), loop.Wait)


def test_a_campaign_whose_lock_is_held_is_busy(bare_store, make_body, settings):
    campaign = _create(bare_store, make_body())
    held = bare_store.campaigns.lock(campaign, 30)
    assert held.acquire()
    try:
        began = time.monotonic()
        with pytest.raises(Busy) as busy:
            offer(bare_store, campaign, time.time(), settings)
        assert time.monotonic() - began >= 0.2  # the lock's timeout, 0.3 s, polled in steps
        assert busy.value.retry_after == 4
    finally:
        held.release()
    assert isinstance(offer(bare_store, campaign, time.time(), settings), list)
