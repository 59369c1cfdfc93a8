"""Expired tickets are pruned, against the real Redis: a ticket whose lease ran out is kept
``expired_ticket_seconds`` (a late label for it is taken while its point has none, as
the README says), then dropped by the next look at the campaign or by a worker's maintenance,
so a campaign whose simulators take points and vanish does not grow without bound."""

import time

import pytest
from redis import Redis

from service.settings import get_settings
from service.store import CampaignStore

KEEP = 1.5  # expired_ticket_seconds in these tests
LEASE = 0.3  # the campaigns' lease_seconds


@pytest.fixture
def keep_expired(monkeypatch):
    """The store's settings (read from the environment) with expired tickets kept KEEP s."""
    monkeypatch.setenv("FBGP_EXPIRED_TICKET_SECONDS", str(KEEP))
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _design_tickets(client, campaign: str) -> list[dict]:
    out = []
    for _ in range(3):
        r = client.get(f"/campaigns/{campaign}/next")
        assert r.status_code == 200, r.text
        out.append(r.json())
    return out


def test_expired_tickets_are_kept_for_late_labels_then_pruned(client, make_body, settings,
                                                              keep_expired):  # fmt: skip
    redis = Redis.from_url(settings.redis_url)
    body = make_body(lease_seconds=LEASE, max_labels=50)
    campaign = client.post("/campaigns", json=body).json()["id"]
    tickets = f"fbgp:c:{campaign}:tickets"
    states = f"fbgp:c:{campaign}:ticket_state"
    first = _design_tickets(client, campaign)
    time.sleep(LEASE + 0.1)
    # the leases ran out: the points are offered again under new tickets
    again = _design_tickets(client, campaign)
    assert {tuple(t["x"]) for t in again} == {tuple(t["x"]) for t in first}
    # a late label for an expired ticket whose point has no label is taken (the README says so)
    r = client.post(f"/campaigns/{campaign}/label", json={"ticket": first[0]["ticket"], "y": 0.5})
    assert r.status_code == 201, r.text
    # simulators that take points and vanish: many rounds of tickets, all expired
    for _ in range(8):
        time.sleep(LEASE + 0.1)
        r = client.get(f"/campaigns/{campaign}/next")
        assert r.status_code in (200, 202), r.text
    issued = 6 + 8
    time.sleep(KEEP + 0.1)
    client.get(f"/campaigns/{campaign}/next")  # a look prunes those expired before now - KEEP
    left = redis.hlen(tickets)
    assert left < issued and left <= 4, left  # the labeled one, and those issued since
    assert redis.hlen(states) == left
    # the labeled expired ticket is kept: its repeat is still recognized
    r = client.post(f"/campaigns/{campaign}/label", json={"ticket": first[0]["ticket"], "y": 0.5})
    assert r.status_code == 200, r.text
    # a pruned one is unknown now
    r = client.post(f"/campaigns/{campaign}/label", json={"ticket": first[1]["ticket"], "y": 0.1})
    assert r.status_code == 404, r.text
    assert client.get(f"/campaigns/{campaign}").json()["n_labeled"] == 1


def test_maintenance_prunes_the_expired_tickets_of_a_campaign_nobody_polls(
    client, make_body, settings, keep_expired
):
    """A worker's maintenance (``revive_all``) prunes too, for a campaign whose simulators are
    all gone (no /next to look)."""
    redis = Redis.from_url(settings.redis_url)
    campaign = client.post("/campaigns", json=make_body(lease_seconds=LEASE)).json()["id"]
    _design_tickets(client, campaign)
    assert redis.hlen(f"fbgp:c:{campaign}:tickets") == 3
    time.sleep(LEASE + KEEP + 0.2)
    CampaignStore(redis).revive_all(time.time(), 15.0)  # what maintenance runs
    assert redis.hlen(f"fbgp:c:{campaign}:tickets") == 0
    assert redis.hlen(f"fbgp:c:{campaign}:ticket_state") == 0
    assert redis.zcard(f"fbgp:c:{campaign}:expired") == 0
    # the points are offered again, as after any expiry
    assert len(_design_tickets(client, campaign)) == 3


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


def test_failed_abandoned_and_superseded_tickets_are_pruned_like_expired_ones(
    client, make_body, settings, keep_expired
):
    redis = Redis.from_url(settings.redis_url)
    body = make_body(lease_seconds=LEASE, max_labels=50, max_retries=10)
    campaign = client.post("/campaigns", json=body).json()["id"]
    states = f"fbgp:c:{campaign}:ticket_state"
    failed, abandoned, late = _design_tickets(client, campaign)
    assert (
        client.post(
            f"/campaigns/{campaign}/fail", json={"ticket": failed["ticket"], "reason": REASON}
        ).status_code
        == 201
    )
    assert client.post(f"/campaigns/{campaign}/abandon",
                       json={"ticket": abandoned["ticket"]}).status_code == 201  # fmt: skip
    # ``late``'s lease runs out; its point goes out again, a late label for it comes first,
    # and the ticket now holding its point can never be labeled: superseded
    time.sleep(LEASE + 0.1)
    again = [t for t in _design_tickets(client, campaign) if t["x"] == late["x"]]
    ok = client.post(f"/campaigns/{campaign}/label", json={"ticket": late["ticket"], "y": 0.5})
    assert ok.status_code == 201, ok.text
    superseded = client.post(f"/campaigns/{campaign}/label",
                             json={"ticket": again[0]["ticket"], "y": 0.7})  # fmt: skip
    assert superseded.status_code == 409
    assert redis.hget(states, again[0]["ticket"]) == b"superseded"
    # the state holds a digest of the reason, not the reason; a repeat still must match it
    assert len(redis.hget(states, failed["ticket"])) < 64
    assert (
        client.post(
            f"/campaigns/{campaign}/fail", json={"ticket": failed["ticket"], "reason": REASON}
        ).status_code
        == 200
    )
    assert (
        client.post(
            f"/campaigns/{campaign}/fail", json={"ticket": failed["ticket"], "reason": "other"}
        ).status_code
        == 409
    )

    time.sleep(KEEP + 0.1)
    client.get(f"/campaigns/{campaign}/next")  # a look prunes what ended before now - KEEP
    for ended in (failed, abandoned, again[0]):
        assert redis.hget(states, ended["ticket"]) is None
    assert redis.hget(states, late["ticket"]).startswith(b"labeled:")  # a label's stays
    gone = client.post(f"/campaigns/{campaign}/fail",
                       json={"ticket": failed["ticket"], "reason": REASON})  # fmt: skip
    assert gone.status_code == 404
    # what the campaign knows of the runs stays: counts, the failure's record, the history
    status = client.get(f"/campaigns/{campaign}").json()
    assert (status["n_failed"], status["n_abandoned"], status["n_labeled"]) == (1, 1, 1)
    events = client.get(f"/campaigns/{campaign}/history").json()
    assert [e["event"] for e in events] == ["run_failed", "run_abandoned"]
    assert events[0]["reason"] == REASON


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
                r = client.post(f"/campaigns/{campaign}/fail",
                                json={"ticket": ticket, "reason": f"{i} {REASON}"})  # fmt: skip
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


KEEP_ENDED = 20


@pytest.fixture
def keep_few_ended(monkeypatch):
    """The store's settings with expired tickets kept a day but at most KEEP_ENDED of them, and
    KEEP_RUNS failed and abandoned runs kept in full."""
    monkeypatch.setenv("FBGP_KEEP_ENDED_TICKETS", str(KEEP_ENDED))
    monkeypatch.setenv("FBGP_KEEP_RUNS", str(KEEP_RUNS))
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_ended_tickets_are_kept_up_to_a_count_whatever_the_churn(client, make_body, settings,
                                                                 keep_few_ended):  # fmt: skip
    """A simulator that takes points and gives them back (or fails them) as fast as it can: the
    latest KEEP_ENDED ended tickets are kept (their reports sent again still answered as
    before), older ones pruned at once rather than a day later; a labeled ticket is never
    pruned. Before the bound every ended ticket was kept 24 h: about 500 bytes a cycle."""
    redis = Redis.from_url(settings.redis_url)
    body = make_body(lease_seconds=60, max_labels=50, max_retries=1000, max_failures=1000)
    campaign = client.post("/campaigns", json=body).json()["id"]
    url = f"/campaigns/{campaign}"
    labeled = client.get(f"{url}/next").json()
    assert client.post(f"{url}/label", json={"ticket": labeled["ticket"], "y": 0.5}).status_code \
        == 201  # fmt: skip

    def cycles(n: int) -> list[str]:
        out = []
        for i in range(n):
            ticket = client.get(f"{url}/next", headers={"Idempotency-Key": f"k{i}-{len(out)}"})
            ticket = ticket.json()["ticket"]
            if i % 2:
                r = client.post(f"{url}/abandon", json={"ticket": ticket})
            else:
                r = client.post(f"{url}/fail", json={"ticket": ticket, "reason": f"{i} {REASON}"})
            assert r.status_code == 201, r.text
            out.append(ticket)
        return out

    first = cycles(2 * KEEP_ENDED)
    after_first = _campaign_bytes(redis, campaign)
    last = cycles(10 * KEEP_ENDED)
    client.get(f"{url}/next")  # a look prunes beyond the count
    after_last = _campaign_bytes(redis, campaign)
    assert after_last < 1.1 * after_first, (after_first, after_last)
    ended = redis.zcard(f"fbgp:c:{campaign}:expired")
    assert ended <= KEEP_ENDED, ended
    # what is kept: the latest ended, the labeled one, the tickets out (the look's own)
    assert redis.hlen(f"fbgp:c:{campaign}:tickets") <= KEEP_ENDED + 2
    assert redis.hlen(f"fbgp:c:{campaign}:ticket_state") <= KEEP_ENDED + 2
    # a recent ended ticket's report sent again gets the answer it got; an old one is unknown
    assert client.post(f"{url}/abandon", json={"ticket": last[-1]}).status_code == 200
    again = client.post(f"{url}/fail", json={"ticket": last[-2], "reason": f"{len(last) - 2} "
                                             f"{REASON}"})  # fmt: skip
    assert again.status_code == 200, again.text
    assert client.post(f"{url}/abandon", json={"ticket": first[1]}).status_code == 404
    # the labeled ticket stays: its label sent again is recognized
    r = client.post(f"{url}/label", json={"ticket": labeled["ticket"], "y": 0.5})
    assert r.status_code == 200, r.text
    status = client.get(url).json()
    assert (status["n_failed"], status["n_abandoned"], status["n_labeled"]) == (120, 120, 1)
