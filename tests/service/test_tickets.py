"""Expired tickets are pruned, against the real Redis: a ticket whose lease ran out is kept
``expired_ticket_seconds`` (a late label for it is taken while its point has none, as
CONTRACT.md says), then dropped by the next look at the campaign or by a worker's maintenance,
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
    # a late label for an expired ticket whose point has no label is taken (CONTRACT.md)
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
