"""Long polls of ``/next`` that hold no thread (:mod:`service.wakeups`). The hand-out
(:class:`service.wakeups.Waiters`) on its own event loop: one look serves every poll waiting,
and a ticket whose poll is gone goes to another poll or is withdrawn, never lost under a lease;
the looks there are plain functions run in the threadpool, as the route's are. And over HTTP on
one real API server: 300 polls wait while ``/healthz`` answers at once, every poll is answered
when its wait ends, and a waiting poll is woken by the change that gives it a point (an abandoned
ticket, a model), not by a timer: this API looks again without a wake-up only every 60 s."""

import asyncio
import multiprocessing
import resource
import threading
import time

import httpx
import pytest

from fbgp_al.clients.ops.load_benchmark import probe_healthz
from fbgp_al.service.loop import Ticket
from fbgp_al.service.wakeups import Waiters
from tests.conftest import start_api, stop

TICKETS = [Ticket(f"t{i}", [float(i)], 60.0, None) for i in range(8)]


async def _settle(withdrawn: list, count: int) -> None:
    """Until ``count`` tickets were withdrawn (in the threadpool), 5 s at most."""
    for _ in range(500):
        if len(withdrawn) >= count:
            return
        await asyncio.sleep(0.01)


def test_one_look_answers_every_waiting_poll():
    async def scenario():
        waiters = Waiters(lambda tickets: None)
        polls = [asyncio.create_task(waiters.wait(0, 10)) for _ in range(3)]
        await asyncio.sleep(0)  # all three wait
        asked = []

        def offer(count):
            asked.append(count)
            return TICKETS[:count]

        mine, _ = await waiters.look(offer, lambda a: False, 1.0)
        assert asked == [4]  # its own and the three waiting, in one look
        assert mine == TICKETS[0]
        assert await asyncio.gather(*polls) == TICKETS[1:4]  # first come, first served

    asyncio.run(scenario())


def test_a_ticket_whose_poll_is_gone_goes_to_the_next_or_is_withdrawn():
    async def scenario():
        withdrawn = []
        waiters = Waiters(withdrawn.extend)
        polls = [asyncio.create_task(waiters.wait(0, 10)) for _ in range(3)]
        await asyncio.sleep(0)
        # two points left for four polls: the first waiting poll gets the second one
        mine, _ = await waiters.look(lambda count: TICKETS[:2], lambda a: False, 1.0)
        assert mine == TICKETS[0]
        polls[0].cancel()  # its request ended before it could answer with its ticket
        assert await polls[1] == TICKETS[1]  # handed on to the next poll waiting
        assert not polls[2].done() and withdrawn == []
        polls[2].cancel()  # woken by nothing: gone without a ticket
        # a poll gone with a ticket and nobody waiting: the ticket is withdrawn
        third = asyncio.create_task(waiters.wait(0, 10))
        await asyncio.sleep(0)
        await waiters.look(lambda count: TICKETS[2:4], lambda a: False, 1.0)
        third.cancel()
        await _settle(withdrawn, 1)
        assert withdrawn == ["t3"]

    asyncio.run(scenario())


def test_the_tickets_of_a_look_whose_poll_is_gone_are_not_lost():
    async def scenario():
        withdrawn = []
        waiters = Waiters(withdrawn.extend)
        other = asyncio.create_task(waiters.wait(0, 10))
        await asyncio.sleep(0)
        release = threading.Event()

        def slow_offer(count):
            release.wait(5)
            return TICKETS[:count]

        looking = asyncio.create_task(waiters.look(slow_offer, lambda a: False, 1.0))
        await asyncio.sleep(0.05)  # the look runs in a thread
        looking.cancel()
        release.set()
        # the poll that waited is told at once to look for itself; the look, once it ends,
        # finds nobody waiting, and its two tickets are withdrawn
        assert await other is None
        await _settle(withdrawn, 2)
        assert sorted(withdrawn) == ["t0", "t1"]

    asyncio.run(scenario())


POLLS = 300
CAMPAIGNS = 3
WAIT = 5.0  # the first polls' wait: every campaign's initial design is out, none gets a point
# each of them is answered within WAIT + MARGIN: far short of the 60 s look, so answered at its
# own deadline; the margin absorbs 300 answers on a loaded 2-core machine (11.5 s was seen)
MARGIN = 20.0
HEALTHZ_BOUND = 2.0  # generous: it is not a timing benchmark (before: /healthz queued for 30 s)
WOKEN_WAIT = 30.0  # the later polls' wait: far longer than any wake-up may take


@pytest.fixture
def polled_api(redis_url, worker_process, tmp_path):
    """An API server of this test's own whose long polls look again only every 60 s unless
    woken."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 4 * POLLS + 256
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    process, url = start_api(redis_url, tmp_path / "api.log", next_poll_seconds=60)
    yield url
    stop(process)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _campaign(client: httpx.Client, make_body) -> tuple[str, list[str]]:
    """A parallel campaign with its initial design all out: its id and the design's tickets."""
    body = make_body(mode="parallel", max_pending=10, max_labels=12)
    campaign = client.post("/campaigns", json=body).raise_for_status().json()["id"]
    tickets = []
    for _ in range(body["initial_design"]["size"]):
        answer = client.get(f"/campaigns/{campaign}/next")
        assert answer.status_code == 200, answer.text
        tickets.append(answer.json()["ticket"])
    assert client.get(f"/campaigns/{campaign}/next").status_code == 202
    return campaign, tickets


async def _poll(client: httpx.AsyncClient, campaign: str, wait: float) -> tuple[int, float]:
    status, seconds, _ = await _poll_point(client, campaign, wait)
    return status, seconds


async def _poll_point(client: httpx.AsyncClient, campaign: str, wait: float):
    started = time.monotonic()
    answer = await client.get(f"/campaigns/{campaign}/next", params={"wait": wait})
    point = answer.json()["x"] if answer.status_code == 200 else None
    return answer.status_code, time.monotonic() - started, point


async def _waiting_then_answered(url: str, campaigns: list[str]) -> None:
    """/healthz is asked every 0.1 s from a process of its own while the polls wait and end
    (in this process, a thousand answers arriving at once would delay it here, not there)."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    prober = context.Process(target=probe_healthz, args=(url, WAIT + 1.0, 30.0, results))
    limits = httpx.Limits(max_connections=POLLS + 50, max_keepalive_connections=POLLS + 50)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as client:
        polls = [
            asyncio.create_task(_poll(client, campaigns[i % CAMPAIGNS], WAIT)) for i in range(POLLS)
        ]
        await asyncio.sleep(0.5)  # the polls are out
        prober.start()
        answers = await asyncio.gather(*polls)
    healthz = results.get(timeout=60)
    prober.join(timeout=30)
    assert len(healthz) >= 20 and max(healthz) < HEALTHZ_BOUND, healthz
    assert sorted({status for status, _ in answers}) == [202]
    slowest = max(seconds for _, seconds in answers)
    assert slowest < WAIT + MARGIN, f"a poll took {slowest:.1f} s (wait {WAIT} s)"


async def _woken(url: str, abandoned: tuple[str, str], labeled: tuple[str, list[str]]) -> None:
    """One poll waits on the campaign whose ticket is abandoned, five on the campaign whose
    design is labeled (its model then gives them five distinct points, and no ticket more,
    with one look for all): all get points promptly."""
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        (campaign_a, ticket), (campaign_b, tickets) = abandoned, labeled
        poll_a = asyncio.create_task(_poll(client, campaign_a, WOKEN_WAIT))
        polls_b = [
            asyncio.create_task(_poll_point(client, campaign_b, WOKEN_WAIT)) for _ in range(5)
        ]
        await asyncio.sleep(1.0)  # every poll is waiting
        assert not poll_a.done() and not any(p.done() for p in polls_b)
        started = time.monotonic()
        answer = await client.post(f"/campaigns/{campaign_a}/abandon", json={"ticket": ticket})
        assert answer.status_code == 201
        status, _ = await poll_a
        assert status == 200 and time.monotonic() - started < 3.0, time.monotonic() - started
        started = time.monotonic()
        for t in tickets:  # the refit that follows gives the model that gives the points
            await client.post(f"/campaigns/{campaign_b}/label", json={"ticket": t, "y": 0.5})
        answers = await asyncio.gather(*polls_b)
        took = time.monotonic() - started
        assert [status for status, _, _ in answers] == [200] * 5, answers
        assert len({tuple(x) for _, _, x in answers}) == 5, answers
        status = (await client.get(f"/campaigns/{campaign_b}")).json()
        assert status["n_pending"] == 5 and status["model_version"] == 3, status
        # a refit of 3 labels takes a few seconds; 60 s would pass before a look without a wake
        assert took < WOKEN_WAIT - 5, took


def test_long_polls_hold_no_thread_and_are_woken(polled_api, make_body):
    with httpx.Client(base_url=polled_api, timeout=60) as client:
        made = [_campaign(client, make_body) for _ in range(CAMPAIGNS)]
    campaigns = [c for c, _ in made]
    asyncio.run(_waiting_then_answered(polled_api, campaigns))
    asyncio.run(_woken(polled_api, (campaigns[0], made[0][1][0]), made[1]))
