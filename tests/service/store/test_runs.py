"""Runs without a label (:mod:`service.store.runs`), against the real Redis: thousands of failed
and abandoned runs keep the latest ``keep_runs`` of each in full and count all, so a campaign's
memory stops growing."""

import time

import pytest
from redis import Redis

from fbgp_al.service import keys
from fbgp_al.service.settings import get_settings

KEEP = 1.5  # expired_ticket_seconds in these tests


@pytest.fixture
def keep_expired(monkeypatch):
    """The store's settings (read from the environment) with expired tickets kept KEEP s."""
    monkeypatch.setenv("FBGP_EXPIRED_TICKET_SECONDS", str(KEEP))
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


@pytest.fixture
def keep_few_runs(monkeypatch, keep_expired):
    """As :func:`keep_expired`, with KEEP_RUNS failed and abandoned runs kept in full."""
    monkeypatch.setenv("FBGP_KEEP_RUNS", str(KEEP_RUNS))
    get_settings.cache_clear()
    yield


KEEP_RUNS = 5
REASON = "Traceback (most recent call last):\n" + "  solver step diverged\n" * 85  # ~1.9 KB


def _campaign_bytes(redis: Redis, campaign: str) -> int:
    return sum(redis.memory_usage(key) or 0 for key in redis.scan_iter(f"fbgp:c:{campaign}:*"))


def test_a_simulator_that_keeps_failing_or_giving_points_back_costs_bounded_memory(
    client, make_body, settings, keep_few_runs
):
    """Thousands of failed and abandoned runs keep the latest KEEP_RUNS of each in full and
    count all; the campaign's memory stops growing (it grew ~7 KB per failure before)."""
    redis = Redis.from_url(settings.redis_url)
    body = make_body(lease_seconds=60, max_labels=50, max_retries=1000, max_failures=1000)
    campaign = client.post("/campaigns", json=body).json()["id"]

    def cycles(start: int, stop: int) -> None:
        for i in range(start, stop):
            ticket = client.get(f"/campaigns/{campaign}/next").json()["ticket"]
            if i % 2:
                r = client.post(f"/campaigns/{campaign}/abandon", json={"ticket": ticket})
            else:
                r = client.post(
                    f"/campaigns/{campaign}/fail",
                    json={"ticket": ticket, "reason": f"{i} {REASON}"},
                )
            assert r.status_code == 201, r.text

    cycles(0, 40)
    time.sleep(KEEP + 0.1)
    client.get(f"/campaigns/{campaign}/next")  # prunes the ended tickets
    after_40 = _campaign_bytes(redis, campaign)
    cycles(40, 200)
    time.sleep(KEEP + 0.1)
    client.get(f"/campaigns/{campaign}/next")
    after_200 = _campaign_bytes(redis, campaign)
    assert after_200 < 1.2 * after_40, (after_40, after_200)

    status = client.get(f"/campaigns/{campaign}").json()
    assert (status["n_failed"], status["n_abandoned"]) == (100, 100)
    assert redis.hlen(f"fbgp:c:{campaign}:tickets") <= 2  # the look's own ticket, at most
    failures = client.get(f"/campaigns/{campaign}/observations").json()["failures"]
    assert [int(f["reason"].split()[0]) for f in failures] == [190, 192, 194, 196, 198]
    events = client.get(f"/campaigns/{campaign}/history").json()
    assert [e["event"] for e in events] == ["run_failed", "run_abandoned"] * KEEP_RUNS
    assert [e["at"] for e in events] == sorted(e["at"] for e in events)
    page = client.get(f"/campaigns/{campaign}/view").text
    assert "the latest 5 of 100" in page


def test_a_failure_model_counts_the_runs_failed_since_the_owner_last_forgot_them(
    bare_store, make_body
):
    """:meth:`~service.store.runs.Runs.counted_failures`, what a refit's failure model reads
    with its candidates: every failed run kept, then none of those before a retry that forgot
    them, and those after it."""
    import json

    from fbgp_al.service.schemas.campaigns import CampaignCreate

    store = bare_store
    campaign = store.campaigns.create(CampaignCreate(**make_body()).model_dump())["id"]
    key = keys.campaign(campaign, "failures")
    for k, at in enumerate((10.0, 20.0)):
        store.r.rpush(key, json.dumps({"x": [1.0 + k], "ticket": f"t{k}", "at": at}))
    assert [run["ticket"] for run in store.runs.counted_failures(campaign)] == ["t0", "t1"]
    store.r.hset(keys.campaign(campaign, "state"), "failures_forgotten_at", 15.0)
    assert [run["ticket"] for run in store.runs.counted_failures(campaign)] == ["t1"]
    assert store.models.candidates(campaign, store.campaigns.spec(campaign), time.time())[3] == [
        json.loads(store.r.lindex(key, 1))
    ]
