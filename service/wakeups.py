"""Long polls of ``/next`` that hold no thread.

A poll waits on its campaign's :class:`Waiters` in this process, an asyncio future, not a
thread. The store publishes the campaign's id on :data:`~service.keys.WAKE_CHANNEL` whenever
something changes what its ``/next`` may answer (a label, an import, a failed or abandoned run, a
model, a refit's end), and one listener per process (a Redis pub/sub subscription) wakes the
campaign's longest-waiting poll. Polls also look again after a fallback interval without a
message (``next_poll_seconds``), so that a lost message or a lease that ran out is still noticed.

The look itself (:func:`service.offers.offer`: the campaign's Redis lock, a snapshot,
the rules, tickets) is short sync Redis work, run in the threadpool, one at a time per campaign
in this process (an :class:`asyncio.Lock`). It asks for a ticket for every poll waiting and
hands them out. An answer "wait" is shared: a poll that comes to look while no change was
announced since the last look, and within the fallback interval, takes that answer without
asking Redis. So a thousand polls of one campaign cost about one look per change and one per
interval, not a thousand, nor one per point handed out.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
import weakref
from collections.abc import AsyncIterator, Callable
from typing import TypeVar

from redis.asyncio import Redis as AsyncRedis
from redis.exceptions import RedisError
from starlette.concurrency import run_in_threadpool

from fbgp_al.service.deps import redis_key
from fbgp_al.service.keys import WAKE_CHANNEL
from fbgp_al.service.loop import Ticket
from fbgp_al.service.settings import Settings

log = logging.getLogger("fbgp.api")
T = TypeVar("T")

RECONNECT_SECONDS = 1.0  # the listener's pause before it subscribes again after an error


class Waiters:
    """The polls of one campaign in this process: the lock that serializes their looks, the
    polls waiting (first in, first out), and the last look's answer while it may be shared.

    A look asks for as many points as there are polls to answer (its own and those waiting),
    and hands the extra tickets to the polls that waited longest, so a model that frees thirty
    points answers thirty waiting polls with one look. A change wakes only the poll that has
    waited longest; when its look hands out every point it asked for, it wakes the next one,
    which may find more. A ticket that no poll can take any more (its request ended meanwhile)
    goes to the next poll waiting, or is withdrawn (``withdraw``: the ticket ids, run in the
    threadpool) so that its point is free at once."""

    def __init__(self, withdraw: Callable[[list[str]], None]) -> None:
        self.lock = asyncio.Lock()
        self.waiting: collections.deque[asyncio.Future] = collections.deque()
        self.generation = 0  # how many changes were announced
        self.shared: tuple[int, float, object] | None = None  # (generation, looked at, answer)
        self.polls = 0
        self.withdraw = withdraw
        self._pending: set[asyncio.Future] = set()  # withdrawals and orphaned looks under way

    def wake(self) -> None:
        """A change: the next look asks Redis again, and the first poll waiting looks now."""
        self.generation += 1
        self.shared = None
        self.pass_on()

    def pass_on(self) -> None:
        """Wake the poll that has waited longest, if any, to look for itself."""
        self._resolve(None)

    def _resolve(self, result: Ticket | None) -> bool:
        """Wake the poll that has waited longest with ``result`` (None: look yourself, or a
        ticket taken for it); False if no poll waits."""
        while self.waiting:
            woken = self.waiting.popleft()
            if not woken.done():
                woken.set_result(result)
                return True
        return False

    def give_back(self, tickets: list[Ticket]) -> None:
        """Tickets issued for polls that cannot take them: to the polls still waiting, the
        rest withdrawn in the background."""
        left = [t.ticket for t in tickets if not self._resolve(t)]
        if left:
            self._track(asyncio.get_running_loop().run_in_executor(None, self.withdraw, left))

    def _track(self, job: asyncio.Future) -> None:
        self._pending.add(job)
        job.add_done_callback(self._done)

    def _done(self, job: asyncio.Future) -> None:
        self._pending.discard(job)
        if not job.cancelled() and job.exception() is not None:
            log.warning(
                "wake-ups: tickets not withdrawn (%s); their leases run out", job.exception()
            )

    def _fresh(self, fresh_for: float) -> tuple[int, float, object] | None:
        """The shared answer, if nothing changed since it and it is younger than
        ``fresh_for`` seconds."""
        shared = self.shared
        fresh = shared is not None and shared[0] == self.generation
        return shared if fresh and time.monotonic() - shared[1] < fresh_for else None

    async def look(
        self,
        offer: Callable[[int], T | list[Ticket]],
        shareable: Callable[[T], bool],
        fresh_for: float,
    ) -> tuple[T | Ticket, int]:
        """The campaign's answer now, and the generation it answers for (taken before the
        look, so a change during it counts). ``offer(count)`` runs in the threadpool and
        returns up to ``count`` tickets or an answer; this poll gets the first ticket, the
        polls waiting the others. An answer that is ``shareable`` is taken by the polls that
        look after it while nothing changed, for ``fresh_for`` seconds, without a look."""
        shared = self._fresh(fresh_for)
        if shared is not None:  # no need to queue behind a look for a known "wait"
            return shared[2], shared[0]  # type: ignore[return-value]
        async with self.lock:
            generation, now = self.generation, time.monotonic()
            shared = self._fresh(fresh_for)
            if shared is not None:
                return shared[2], generation  # type: ignore[return-value]
            self.shared = None
            wanted = 1 + sum(not f.done() for f in self.waiting)
            job = asyncio.ensure_future(run_in_threadpool(offer, wanted))
            try:
                answer = await asyncio.shield(job)
            except asyncio.CancelledError:  # this request is gone: its look's tickets are not
                job.add_done_callback(self._orphaned)
                self.pass_on()
                raise
            except BaseException:
                self.pass_on()  # this poll's error: the next one looks for itself
                raise
            if isinstance(answer, list):
                self.give_back(answer[1:])
                if len(answer) == wanted:
                    self.pass_on()  # more points may be left, for polls that came meanwhile
                return answer[0], generation
            if not shareable(answer):
                self.pass_on()
            elif self.generation == generation:
                self.shared = (generation, now, answer)
            return answer, generation

    def _orphaned(self, job: asyncio.Future) -> None:
        """A look whose poll was cancelled has ended: its tickets go back."""
        if not job.cancelled() and job.exception() is None and isinstance(job.result(), list):
            self.give_back(job.result())

    async def wait(self, seen: int, seconds: float) -> Ticket | None:
        """Until this poll is woken by a change after generation ``seen`` (at once if one came
        during its look), or ``seconds`` have passed. Returns a ticket that another poll's look
        took for this one, or None: look again."""
        if self.generation != seen:
            return None
        woken = asyncio.get_running_loop().create_future()
        self.waiting.append(woken)
        try:
            await asyncio.wait((woken,), timeout=max(0.0, seconds))
        except asyncio.CancelledError:
            if woken.done() and not woken.cancelled():  # woken, but the request is gone
                handed = woken.result()
                if handed is None:
                    self.pass_on()  # the next poll looks instead
                else:
                    self.give_back([handed])
            raise
        finally:
            if not woken.done():
                woken.cancel()
        return None if woken.cancelled() else woken.result()


class Hub:
    """This process's (this event loop's) waiters by campaign, and the pub/sub listener that
    wakes them."""

    def __init__(self, settings: Settings) -> None:
        self.redis_url = settings.redis_url
        self.options = settings.redis_options()  # redis-py's TLS options
        self.key = redis_key(settings)
        self.campaigns: dict[str, Waiters] = {}
        self.listener: asyncio.Task | None = None
        self.subscribed = False

    def start(self) -> None:
        if self.listener is None or self.listener.done():
            self.listener = asyncio.get_running_loop().create_task(self._listen())

    @contextlib.asynccontextmanager
    async def waiting(
        self, campaign_id: str, withdraw: Callable[[list[str]], None]
    ) -> AsyncIterator[Waiters]:
        """The campaign's :class:`Waiters` (``withdraw``: how to take back its tickets that no
        poll received), while this poll lasts."""
        self.start()
        waiters = self.campaigns.get(campaign_id)
        if waiters is None:
            waiters = self.campaigns[campaign_id] = Waiters(withdraw)
        waiters.polls += 1
        try:
            yield waiters
        finally:
            waiters.polls -= 1
            if waiters.polls == 0 and self.campaigns.get(campaign_id) is waiters:
                del self.campaigns[campaign_id]

    def wake(self, campaign_id: str) -> None:
        waiters = self.campaigns.get(campaign_id)
        if waiters is not None:
            waiters.wake()

    def wake_all(self) -> None:
        for waiters in list(self.campaigns.values()):
            waiters.wake()

    async def _listen(self) -> None:
        """Subscribe to the wake-up channel and wake the campaigns named on it, for ever;
        after an error, subscribe again (and wake everyone: a message may have been missed)."""
        while True:
            client = AsyncRedis.from_url(self.redis_url, health_check_interval=30, **self.options)
            try:
                async with client.pubsub(ignore_subscribe_messages=True) as pubsub:
                    await pubsub.subscribe(WAKE_CHANNEL)
                    self.subscribed = True
                    self.wake_all()
                    async for message in pubsub.listen():
                        if message and message.get("type") == "message":
                            self.wake(message["data"].decode())
            except (RedisError, OSError) as error:
                if self.subscribed:
                    log.warning("wake-ups: %s; polls look every next_poll_seconds meanwhile", error)
            except Exception:  # never let the listener die: polls would only time out
                log.exception("wake-ups: the listener failed; it subscribes again")
            finally:
                self.subscribed = False
                with contextlib.suppress(Exception):
                    await client.aclose()
            await asyncio.sleep(RECONNECT_SECONDS)


_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Hub] = weakref.WeakKeyDictionary()


def hub(settings: Settings) -> Hub:
    """The running event loop's hub (one per process under uvicorn; one per test client), on
    ``settings``' Redis."""
    loop = asyncio.get_running_loop()
    found = _hubs.get(loop)
    if found is None or found.key != redis_key(settings):
        if found is not None and found.listener is not None:
            found.listener.cancel()
        found = _hubs[loop] = Hub(settings)
    return found
