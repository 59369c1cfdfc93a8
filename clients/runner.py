"""A remote simulator in a few lines: ask the service for a point, run ``f``, post the label.

``run_simulator(url, campaign_id, f)`` needs only a function ``f(x) -> y``; through
:class:`clients.client.FbgpClient` it long-polls ``/next``, honours 202 and ``Retry-After``,
retries connection errors, and stops when the campaign is done (410).
"""

from __future__ import annotations

from collections.abc import Callable

from clients.client import ApiError, FbgpClient


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
    labels were posted here). Returns the number of labels this call posted.

    ``token``: the bearer token (default ``FBGP_API_TOKEN``); ``wait``: seconds per long poll;
    ``on_label(x, y, n_labeled)`` is called after each stored label.
    """
    posted = 0
    with FbgpClient(url, token) as api:
        while max_labels is None or posted < max_labels:
            point = api.next_point(campaign_id, wait=wait)
            if point is None:
                break
            y = float(f(point.x))
            try:
                answer = api.label(campaign_id, point.ticket, y)
            except ApiError as error:
                if error.status_code == 410:  # others filled the campaign meanwhile
                    break
                raise
            posted += 1
            if on_label:
                on_label(point.x, y, answer.n_labeled)
    return posted
