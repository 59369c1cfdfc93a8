"""The long polls' hand-out (:class:`service.wakeups.Waiters`), on its own event loop: one look
serves every poll waiting, and a ticket whose poll is gone goes to another poll or is withdrawn,
never lost under a lease. The looks here are plain functions run in the threadpool, as the
route's are; the Redis side is tested over HTTP (test_long_polls)."""

import asyncio
import threading

from service.wakeups import Waiters

TICKETS = [{"ticket": f"t{i}", "x": [float(i)]} for i in range(8)]


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
