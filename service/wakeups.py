"""Long polls of ``/next`` that hold no thread.

A poll waits on its campaign's :class:`Waiters` in this process, an asyncio future, not a
thread. The store publishes the campaign's id on :data:`~service.store.WAKE_CHANNEL` whenever
something changes what its ``/next`` may answer (a label, an import, a failed or abandoned run, a
model, a refit's end), and one listener per process (a Redis pub/sub subscription) wakes the
campaign's longest-waiting poll. Polls also look again after a fallback interval without a
message (``next_poll_seconds``), so that a lost message or a lease that ran out is still noticed.

The look itself (:func:`service.routes.labeling.offer`: the campaign's Redis lock, a snapshot,
the rules, a ticket) is short sync Redis work, run in the threadpool, one at a time per campaign
in this process (an :class:`asyncio.Lock`). An answer "wait" is shared: a poll that comes to
look while no change was announced since the last look, and within the fallback interval, takes
that answer without asking Redis. A poll that got a point wakes the next one. So a thousand
polls of one campaign cost one look per change plus one per point handed out, and one per
interval, not a thousand.
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

from service.store import WAKE_CHANNEL

log = logging.getLogger("fbgp.api")
T = TypeVar("T")

RECONNECT_SECONDS = 1.0  # the listener's pause before it subscribes again after an error


class Waiters:
    """The polls of one campaign in this process: the lock that serializes their looks, the
    polls waiting (first in, first out), and the last look's answer while it may be shared.

    A change wakes only the poll that has waited longest; when its look hands out a point (or
    ends otherwise than "wait"), it wakes the next one, which may get a point too, and so on,
    so a change costs one look per point handed out plus one, however many polls wait."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.waiting: collections.deque[asyncio.Future] = collections.deque()
        self.generation = 0  # how many changes were announced
        self.shared: tuple[int, float, object] | None = None  # (generation, looked at, answer)
        self.polls = 0

    def wake(self) -> None:
        """A change: the next look asks Redis again, and the first poll waiting looks now."""
        self.generation += 1
        self.shared = None
        self.pass_on()

    def pass_on(self) -> None:
        """Wake the poll that has waited longest, if any."""
        while self.waiting:
            woken = self.waiting.popleft()
            if not woken.done():
                woken.set_result(True)
                return

    async def look(
        self, offer: Callable[[], T], shareable: Callable[[T], bool], fresh_for: float
    ) -> tuple[T, int]:
        """The campaign's answer now (``offer`` in the threadpool, or the last one if
        ``shareable`` and nothing changed since, within ``fresh_for`` seconds), and the
        generation it answers for (taken before the look, so a change during it counts)."""
        async with self.lock:
            generation, now = self.generation, time.monotonic()
            shared = self.shared
            if shared is not None and shared[0] == generation and now - shared[1] < fresh_for:
                return shared[2], generation  # type: ignore[return-value]
            self.shared = None
            try:
                answer = await run_in_threadpool(offer)
            except BaseException:
                self.pass_on()  # this poll's error: the next one looks for itself
                raise
            if not shareable(answer):
                self.pass_on()  # a point handed out: the next poll may get one too
            elif self.generation == generation:
                self.shared = (generation, now, answer)
            return answer, generation

    async def wait(self, seen: int, seconds: float) -> None:
        """Until this poll is woken by a change after generation ``seen`` (at once if one came
        during its look), or ``seconds`` have passed."""
        if self.generation != seen:
            return
        woken = asyncio.get_running_loop().create_future()
        self.waiting.append(woken)
        try:
            await asyncio.wait((woken,), timeout=max(0.0, seconds))
        except asyncio.CancelledError:
            if woken.done() and not woken.cancelled():
                self.pass_on()  # woken, but the request is gone: the next poll looks instead
            raise
        finally:
            if not woken.done():
                woken.cancel()


class Hub:
    """This process's (this event loop's) waiters by campaign, and the pub/sub listener that
    wakes them."""

    def __init__(self, redis_url: str) -> None:
        self.redis_url = redis_url
        self.campaigns: dict[str, Waiters] = {}
        self.listener: asyncio.Task | None = None
        self.subscribed = False

    def start(self) -> None:
        if self.listener is None or self.listener.done():
            self.listener = asyncio.get_running_loop().create_task(self._listen())

    @contextlib.asynccontextmanager
    async def waiting(self, campaign_id: str) -> AsyncIterator[Waiters]:
        """The campaign's :class:`Waiters`, while this poll lasts."""
        self.start()
        waiters = self.campaigns.setdefault(campaign_id, Waiters())
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
            client = AsyncRedis.from_url(self.redis_url, health_check_interval=30)
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
                    log.warning("wake-ups: %s; polls look every next_poll_seconds meanwhile",
                                error)  # fmt: skip
            except Exception:  # never let the listener die: polls would only time out
                log.exception("wake-ups: the listener failed; it subscribes again")
            finally:
                self.subscribed = False
                with contextlib.suppress(Exception):
                    await client.aclose()
            await asyncio.sleep(RECONNECT_SECONDS)


_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Hub] = weakref.WeakKeyDictionary()


def hub(redis_url: str) -> Hub:
    """The running event loop's hub (one per process under uvicorn; one per test client)."""
    loop = asyncio.get_running_loop()
    found = _hubs.get(loop)
    if found is None or found.redis_url != redis_url:
        if found is not None and found.listener is not None:
            found.listener.cancel()
        found = _hubs[loop] = Hub(redis_url)
    return found
