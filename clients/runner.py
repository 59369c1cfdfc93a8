"""A remote simulator in a few lines: ask the service for a point, run ``f``, post the label.

``run_simulator(url, campaign_id, f)`` needs only httpx and a function ``f(x) -> y``; it polls
``/next`` with long polls, honours 202 and ``Retry-After``, retries connection errors, and stops
when the campaign is done (410).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx


def _client(url: str, token: str | None, timeout: float) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout)


def _request(
    client: httpx.Client, method: str, path: str, retries: int = 10, **kw
) -> httpx.Response:
    for attempt in range(retries):
        try:
            return client.request(method, path, **kw)
        except httpx.TransportError:
            if attempt == retries - 1:
                raise
            time.sleep(min(5.0, 0.2 * 2**attempt))
    raise AssertionError("unreachable")


def run_simulator(
    url: str,
    campaign_id: str,
    f: Callable[[list[float]], float],
    *,
    token: str | None = None,
    wait: float = 20.0,
    max_labels: int | None = None,
    on_label: Callable[[list[float], float, int], None] | None = None,
) -> int:
    """Label points of campaign ``campaign_id`` with ``f`` until it is done (or ``max_labels``
    labels were posted here). Returns the number of labels this call posted."""
    posted = 0
    with _client(url, token, timeout=wait + 30) as client:
        while max_labels is None or posted < max_labels:
            r = _request(client, "GET", f"/campaigns/{campaign_id}/next", params={"wait": wait})
            if r.status_code == 410:
                break
            if r.status_code == 202:
                time.sleep(min(float(r.headers.get("Retry-After", "1")), 1.0) if wait == 0 else 0)
                continue
            r.raise_for_status()
            point = r.json()
            y = float(f(point["x"]))
            answer = _request(client, "POST", f"/campaigns/{campaign_id}/label",
                              json={"ticket": point["ticket"], "y": y})  # fmt: skip
            if answer.status_code == 410:
                break
            answer.raise_for_status()
            posted += 1
            if on_label:
                on_label(point["x"], y, answer.json()["n_labeled"])
    return posted
