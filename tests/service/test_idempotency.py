"""``/next`` and imports with an ``Idempotency-Key``, against the real Redis. A ``/next`` sent
again because its answer was lost gets the ticket it was answered with, not a second point, so
that no ticket is left out for a lease that nobody holds; once that ticket has ended or run
out, the key asks for a new point; two requests with one key in flight at once end with one
ticket. An import sent again is stored once."""

import threading
import time

import httpx
import pytest
from redis import Redis

from clients.client import FbgpClient
from service.store import CampaignStore

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


@pytest.mark.parametrize("key", ["", "has space", "x" * 201, "caf\u00e9"])
def test_a_malformed_key_is_422(client, make_body, key):
    campaign = client.post("/campaigns", json=make_body()).json()["id"]
    r = client.get(f"/campaigns/{campaign}/next",
                   headers=[("Idempotency-Key", key.encode())])  # fmt: skip
    assert r.status_code == 422, r.text
    assert "idempotency-key" in r.text.lower()


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
        ticket = store.issue(campaign, [(None, [1.0], None)], 3600, now)[0]
        assert store.claim(campaign, f"k{i}", ticket, now) == ticket
        store.withdraw(campaign, [ticket["ticket"]])
    held = store.issue(campaign, [(None, [1.5], None)], 3600, now)[0]
    store.claim(campaign, "held", held, now)
    assert redis.hlen(f"fbgp:c:{campaign}:requests") <= 2 * 1 + 64 + 1
    assert store.replay(campaign, "held", now) == held
    assert store.replay(campaign, "k299", now) is None
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


def test_the_client_s_retry_after_a_lost_answer_gets_the_same_ticket(api_url, make_body,
                                                                     redis_url):  # fmt: skip
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


OFF_GRID = {"x": [[1.123], [1.456]], "y": [1.0, 2.0]}  # no pool points: repeats not refused


def _import(client, campaign: str, body: dict, key: str | None = "import-1"):
    headers = {} if key is None else {"Idempotency-Key": key}
    return client.post(f"/campaigns/{campaign}/observations", json=body, headers=headers)


def test_an_import_sent_again_with_its_key_is_stored_once(client, make_body):
    campaign = client.post("/campaigns", json=make_body(max_labels=4)).json()["id"]
    first = _import(client, campaign, OFF_GRID)
    assert first.status_code == 201 and first.json() == {"n_labeled": 2, "imported": 2}
    again = _import(client, campaign, OFF_GRID)
    assert again.status_code == 200 and again.json() == first.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert len(client.get(f"/campaigns/{campaign}/observations").json()["y"]) == 2
    # the key with other observations: refused, nothing stored
    other = _import(client, campaign, {"x": [[1.789]], "y": [3.0]})
    assert other.status_code == 422 and "other observations" in other.text
    # a new key fills the campaign; its repeat is still the first answer, not a 409
    full = _import(client, campaign, OFF_GRID, key="import-2")
    assert full.status_code == 201 and full.json()["n_labeled"] == 4
    assert _import(client, campaign, OFF_GRID, key="import-2").json() == full.json()
    assert _import(client, campaign, OFF_GRID, key="import-3").status_code == 409
    assert len(client.get(f"/campaigns/{campaign}/observations").json()["y"]) == 4


def test_without_a_key_an_import_sent_twice_is_stored_twice(client, make_body):
    """What the key is for: the service cannot tell a retry from a second import."""
    campaign = client.post("/campaigns", json=make_body(max_labels=10)).json()["id"]
    assert _import(client, campaign, OFF_GRID, key=None).status_code == 201
    assert _import(client, campaign, OFF_GRID, key=None).json()["n_labeled"] == 4


def test_the_client_s_import_retried_after_a_lost_answer_is_stored_once(api_url, make_body):
    with FbgpClient(api_url, token="", backoff=0.05) as api:
        lossy = LoseFirstAnswer(api._http._transport, "/observations")
        api._http._transport = lossy
        campaign = api.create_campaign(make_body(max_labels=10)).id
        assert api.import_observations(campaign, OFF_GRID["x"], OFF_GRID["y"]) == 2
        assert lossy.lost == 1 and len(lossy.keys) == 2 and lossy.keys[0] == lossy.keys[1]
        assert len(api.observations(campaign).y) == 2
