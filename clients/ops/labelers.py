"""The simulator threads of ``fbgp-al soak`` and of its ``--adversarial`` test, and the ledger of
the labels the service acknowledged to them."""

from __future__ import annotations

import threading
import time
from collections import Counter

import httpx
import numpy as np

from fbgp_al.clients.client import ApiError, FbgpClient, Pending
from fbgp_al.clients.simulators import get_simulator

LABEL_PATIENCE = 90.0  # seconds a simulator keeps asking to store one label


class Ledger:
    """The labels acknowledged by the service, per campaign and ticket (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.acked: dict[str, dict[str, float]] = {}
        self.repeats = 0  # acknowledged by a 200: a repeat whose first answer was lost
        self.rejected: Counter = Counter()  # label posts answered 404/409/410
        self.unanswered = 0  # labels given up on without an answer
        self.errors: Counter = Counter()  # transient errors the simulators rode out
        self.last_ack = -1.0  # time.monotonic() of the latest acknowledgement

    def ack(self, campaign: str, ticket: str, y: float, created: bool) -> None:
        with self._lock:
            labels = self.acked.setdefault(campaign, {})
            if ticket not in labels:
                labels[ticket] = y
                self.repeats += not created
            self.last_ack = time.monotonic()

    def error(self, kind: str) -> None:
        with self._lock:
            self.errors[kind] += 1

    def reject(self, code: int) -> None:
        with self._lock:
            self.rejected[str(code)] += 1

    def give_up(self) -> None:
        with self._lock:
            self.unanswered += 1

    def count(self) -> int:
        with self._lock:
            return sum(len(v) for v in self.acked.values())

    def of(self, campaign: str) -> dict[str, float]:
        with self._lock:
            return dict(self.acked.get(campaign, {}))


def error_kind(error: Exception) -> str:
    if isinstance(error, ApiError):
        return f"http {error.status_code}"
    return type(error).__name__


class Labeler(threading.Thread):
    """Labels one campaign: ``/next`` (long poll), ``y`` from the built-in simulator's mean plus
    seeded noise, ``/label`` with the same ``y`` until an answer comes. Rides out transient
    errors; stops when the campaign is done or ``stop`` is set. ``waits``: every wait for a
    point, from the answer to a label (or the start) until ``/next`` hands one out, the one
    still open when it stops included; ``pending_pause``: the longest sleep after a 202."""

    pending_pause = 2.0

    def __init__(
        self,
        url: str,
        campaign: str,
        simulator: str,
        seed: list[int],
        ledger: Ledger,
        stop: threading.Event,
    ):
        super().__init__(name=f"sim-{campaign}-{seed[-1]}", daemon=True)
        self.url, self.campaign, self.ledger, self.stop = url, campaign, ledger, stop
        self.sim = get_simulator(simulator)
        self.rng = np.random.default_rng(seed)
        self.done = False
        self.waits: list[float] = []

    def run(self) -> None:
        since = time.monotonic()
        with FbgpClient(self.url, token="", timeout=30.0, retries=3) as api:
            while not self.stop.is_set():
                try:
                    point = api.try_next(self.campaign, wait=5.0)
                except (ApiError, httpx.HTTPError) as error:
                    self.ledger.error(error_kind(error))
                    self.stop.wait(0.5)
                    continue
                if point is None:
                    self.done = True
                    return
                if isinstance(point, Pending):
                    self.stop.wait(min(point.retry_after, self.pending_pause))
                    continue
                self.waits.append(time.monotonic() - since)
                y = float(self.sim.sample(np.array([point.x]), self.rng)[0])
                if self._post(api, point.ticket, y) == 410:
                    self.done = True
                    return
                since = time.monotonic()
            self.waits.append(time.monotonic() - since)  # the wait the stop cut short

    def _post(self, api: FbgpClient, ticket: str, y: float) -> int | None:
        """Post one label until the service answers it (the same ``y`` every time, so that a
        repeat of a label stored already is answered 200). Returns the status code, None if no
        answer came within :data:`LABEL_PATIENCE` seconds."""
        deadline = time.monotonic() + LABEL_PATIENCE
        while time.monotonic() < deadline:
            try:
                result = api.label(self.campaign, ticket, y)
            except ApiError as error:
                if error.status_code in (404, 409, 410, 422):
                    self.ledger.reject(error.status_code)
                    return error.status_code
                self.ledger.error(error_kind(error))
            except httpx.HTTPError as error:
                self.ledger.error(error_kind(error))
            else:
                self.ledger.ack(self.campaign, ticket, y, result.created)
                return 201 if result.created else 200
            time.sleep(0.5)
        self.ledger.give_up()
        return None
