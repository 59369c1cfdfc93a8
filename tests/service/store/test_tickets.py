"""Tickets (:mod:`service.store.tickets`), against the real Redis. Expired tickets are pruned: a
ticket whose lease ran out is kept ``expired_ticket_seconds`` (a late label for it is taken while
its point has none, as the README says), then dropped by the next look at the campaign or by a
worker's maintenance, so a campaign whose simulators take points and vanish does not grow without
bound; failed, abandoned and superseded tickets likewise. ``/next`` with an ``Idempotency-Key``: a
``/next`` sent again because its answer was lost gets the ticket it was answered with, not a
second point, so that no ticket is left out for a lease that nobody holds; once that ticket has
ended or run out, the key asks for a new point; two requests with one key in flight at once end
with one ticket; the keys kept stay bounded."""

import threading
import time

import httpx
import pytest
from redis import Redis

from fbgp_al.clients.client import FbgpClient
from fbgp_al.service.settings import get_settings
from fbgp_al.service.store import CampaignStore

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


def test_expired_tickets_are_kept_for_late_labels_then_pruned(
    client, make_body, settings, keep_expired
):
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
    CampaignStore(redis).revivals.revive_all(time.time(), 15.0)  # what maintenance runs
    assert redis.hlen(f"fbgp:c:{campaign}:tickets") == 0
    assert redis.hlen(f"fbgp:c:{campaign}:ticket_state") == 0
    assert redis.zcard(f"fbgp:c:{campaign}:expired") == 0
    # the points are offered again, as after any expiry
    assert len(_design_tickets(client, campaign)) == 3


REASON = "Traceback (most recent call last):\n" + "  solver step diverged\n" * 85  # ~1.9 KB


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
    assert (
        client.post(
            f"/campaigns/{campaign}/abandon", json={"ticket": abandoned["ticket"]}
        ).status_code
        == 201
    )
    # ``late``'s lease runs out; its point goes out again, a late label for it comes first,
    # and the ticket now holding its point can never be labeled: superseded
    time.sleep(LEASE + 0.1)
    again = [t for t in _design_tickets(client, campaign) if t["x"] == late["x"]]
    ok = client.post(f"/campaigns/{campaign}/label", json={"ticket": late["ticket"], "y": 0.5})
    assert ok.status_code == 201, ok.text
    superseded = client.post(
        f"/campaigns/{campaign}/label", json={"ticket": again[0]["ticket"], "y": 0.7}
    )
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
    gone = client.post(
        f"/campaigns/{campaign}/fail", json={"ticket": failed["ticket"], "reason": REASON}
    )
    assert gone.status_code == 404
    # what the campaign knows of the runs stays: counts, the failure's record, the history
    status = client.get(f"/campaigns/{campaign}").json()
    assert (status["n_failed"], status["n_abandoned"], status["n_labeled"]) == (1, 1, 1)
    events = client.get(f"/campaigns/{campaign}/history").json()
    assert [e["event"] for e in events] == ["run_failed", "run_abandoned"]
    assert events[0]["reason"] == REASON


KEY = {"Idempotency-Key": "3f1c0d9e-retry-me"}


def _next(client, campaign: str, headers: dict | None = None, wait: float = 0.0):
    return client.get(f"/campaigns/{campaign}/next", params={"wait": wait}, headers=headers or {})


def _out(settings, campaign: str) -> int:
    return Redis.from_url(settings.redis_url).zcard(f"fbgp:c:{campaign}:leases")


def test_the_same_key_gets_the_same_ticket_while_it_is_out(client, make_body, settings):
    campaign = client.post("/campaigns", json=make_body(max_labels=20)).json()["id"]
    first = _next(client, campaign, KEY)
    assert first.status_code == 200 and "Idempotent-Replayed" not in first.headers
    again = _next(client, campaign, KEY)
    assert again.status_code == 200, again.text
    assert again.json() == first.json() and again.headers["Idempotent-Replayed"] == "true"
    other = _next(client, campaign, {"Idempotency-Key": "another"})
    assert other.json()["ticket"] != first.json()["ticket"]
    assert _out(settings, campaign) == 2  # the repeat issued nothing
    # a renewal shows in the replayed answer's expiry
    time.sleep(0.05)
    renewed = client.post(f"/campaigns/{campaign}/renew", json={"ticket": first.json()["ticket"]})
    assert _next(client, campaign, KEY).json()["expires_at"] == renewed.json()["expires_at"]


@pytest.mark.parametrize("end", ["label", "abandon", "expire"])
def test_once_its_ticket_ended_the_key_asks_for_a_new_point(client, make_body, settings, end):
    lease = 0.4 if end == "expire" else 3600
    campaign = client.post("/campaigns", json=make_body(max_labels=20, lease_seconds=lease))
    campaign = campaign.json()["id"]
    ticket = _next(client, campaign, KEY).json()["ticket"]
    if end == "label":
        r = client.post(f"/campaigns/{campaign}/label", json={"ticket": ticket, "y": 0.5})
    elif end == "abandon":
        r = client.post(f"/campaigns/{campaign}/abandon", json={"ticket": ticket})
    else:
        time.sleep(lease + 0.1)
        r = httpx.Response(201)
    assert r.status_code == 201
    again = _next(client, campaign, KEY)
    assert again.status_code == 200 and "Idempotent-Replayed" not in again.headers
    assert again.json()["ticket"] != ticket
    assert _out(settings, campaign) == 1


def test_two_requests_with_one_key_in_flight_end_with_one_ticket(client, make_body, settings):
    """The design's three points are out; two polls with one key wait. When two points come
    free, each poll's look may take one: the key keeps the first bound, the other is withdrawn
    (its point free at once), and both polls answer the same ticket."""
    campaign = client.post("/campaigns", json=make_body(max_labels=20)).json()["id"]
    design = [_next(client, campaign).json()["ticket"] for _ in range(3)]
    assert _next(client, campaign).status_code == 202
    answers: list = [None, None]

    def poll(i: int) -> None:
        answers[i] = _next(client, campaign, KEY, wait=6)

    polls = [threading.Thread(target=poll, args=(i,)) for i in range(2)]
    for p in polls:
        p.start()
    time.sleep(0.5)  # both are waiting
    for ticket in design[:2]:
        client.post(f"/campaigns/{campaign}/abandon", json={"ticket": ticket})
    for p in polls:
        p.join(timeout=30)
    assert all(a is not None and a.status_code == 200 for a in answers), answers
    assert answers[0].json()["ticket"] == answers[1].json()["ticket"]
    assert sum(a.headers.get("Idempotent-Replayed") == "true" for a in answers) == 1
    assert _out(settings, campaign) == 2  # the design's third ticket and the key's
    free = _next(client, campaign)  # the withdrawn ticket's point is offered at once
    assert free.status_code == 200, free.text
    assert _out(settings, campaign) == 3


def test_the_keys_kept_stay_bounded_by_the_tickets_out(client, make_body, settings):
    """A key is worth keeping only while its ticket is out: as the hash grows past twice the
    tickets out (and 64), the others are dropped."""
    campaign = client.post("/campaigns", json=make_body(max_labels=20)).json()["id"]
    redis = Redis.from_url(settings.redis_url)
    store = CampaignStore(redis)
    now = time.time()
    for i in range(300):
        ticket = store.tickets.issue(campaign, [(None, [1.0], None)], 3600, now)[0]
        assert store.tickets.claim(campaign, f"k{i}", ticket, now) == ticket
        store.tickets.withdraw(campaign, [ticket.ticket])
    held = store.tickets.issue(campaign, [(None, [1.5], None)], 3600, now)[0]
    store.tickets.claim(campaign, "held", held, now)
    assert redis.hlen(f"fbgp:c:{campaign}:requests") <= 2 * 1 + 64 + 1
    assert store.tickets.replay(campaign, "held", now) == held
    assert store.tickets.replay(campaign, "k299", now) is None
    client.delete(f"/campaigns/{campaign}")
    assert not redis.exists(f"fbgp:c:{campaign}:requests")


class LoseFirstAnswer(httpx.BaseTransport):
    """Passes requests on, but drops the answer to the first request to a path ending in
    ``suffix`` after the server sent it (a connection reset on the way back)."""

    def __init__(self, inner: httpx.BaseTransport, suffix: str):
        self.inner, self.suffix, self.lost, self.keys = inner, suffix, 0, []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.url.path.endswith(self.suffix):
            self.keys.append(request.headers.get("Idempotency-Key"))
            if not self.lost:
                response.read()
                self.lost += 1
                raise httpx.ReadError("connection reset by peer", request=request)
        return response


def test_the_client_s_retry_after_a_lost_answer_gets_the_same_ticket(api_url, make_body, redis_url):
    with FbgpClient(api_url, token="", backoff=0.05) as api:
        lossy = LoseFirstAnswer(api._http._transport, "/next")
        api._http._transport = lossy
        campaign = api.create_campaign(make_body(max_labels=20)).id
        point = api.next_point(campaign)
        assert lossy.lost == 1 and len(lossy.keys) == 2 and lossy.keys[0] == lossy.keys[1]
        assert Redis.from_url(redis_url).zcard(f"fbgp:c:{campaign}:leases") == 1
        assert api.label(campaign, point.ticket, 0.5).n_labeled == 1
        second = api.next_point(campaign)  # a new call: a new key, a new point
        assert second.ticket != point.ticket and lossy.keys[2] != lossy.keys[0]


KEEP_ENDED = 20
KEEP_RUNS = 5


def _campaign_bytes(redis: Redis, campaign: str) -> int:
    return sum(redis.memory_usage(key) or 0 for key in redis.scan_iter(f"fbgp:c:{campaign}:*"))


@pytest.fixture
def keep_few_ended(monkeypatch):
    """The store's settings with expired tickets kept a day but at most KEEP_ENDED of them, and
    KEEP_RUNS failed and abandoned runs kept in full."""
    monkeypatch.setenv("FBGP_KEEP_ENDED_TICKETS", str(KEEP_ENDED))
    monkeypatch.setenv("FBGP_KEEP_RUNS", str(KEEP_RUNS))
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_ended_tickets_are_kept_up_to_a_count_whatever_the_churn(
    client, make_body, settings, keep_few_ended
):
    """A simulator that takes points and gives them back (or fails them) as fast as it can: the
    latest KEEP_ENDED ended tickets are kept (their reports sent again still answered as
    before), older ones pruned at once rather than a day later; a labeled ticket is never
    pruned. Before the bound every ended ticket was kept 24 h: about 500 bytes a cycle."""
    redis = Redis.from_url(settings.redis_url)
    body = make_body(lease_seconds=60, max_labels=50, max_retries=1000, max_failures=1000)
    campaign = client.post("/campaigns", json=body).json()["id"]
    url = f"/campaigns/{campaign}"
    labeled = client.get(f"{url}/next").json()
    assert (
        client.post(f"{url}/label", json={"ticket": labeled["ticket"], "y": 0.5}).status_code == 201
    )

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
    again = client.post(
        f"{url}/fail", json={"ticket": last[-2], "reason": f"{len(last) - 2} {REASON}"}
    )
    assert again.status_code == 200, again.text
    assert client.post(f"{url}/abandon", json={"ticket": first[1]}).status_code == 404
    # the labeled ticket stays: its label sent again is recognized
    r = client.post(f"{url}/label", json={"ticket": labeled["ticket"], "y": 0.5})
    assert r.status_code == 200, r.text
    status = client.get(url).json()
    assert (status["n_failed"], status["n_abandoned"], status["n_labeled"]) == (120, 120, 1)
