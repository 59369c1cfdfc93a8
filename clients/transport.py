"""The client's transport: one HTTP call, retried where it is safe (:func:`send`; which calls
are idempotent, and why retrying them is safe, :mod:`clients.client`'s docstring says), its
non-2xx answer raised as :class:`~clients.errors.ApiError` (:func:`call`), and the jittered
waits between tries, which :mod:`clients.runner` uses too."""

from __future__ import annotations

import logging
import random
import time
from typing import Any

import httpx

from fbgp_al.clients.errors import ApiError

log = logging.getLogger("fbgp.client")

# an idempotent call may be retried after any transport error; any other only after these, which
# mean the request was never sent
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout)
LONGEST_RETRY_AFTER = 60.0  # seconds; a larger Retry-After is capped


def answer_detail(response: httpx.Response) -> tuple[str, Any]:
    """A non-2xx answer's message (the server's ``detail``) and its body."""
    try:
        body = response.json()
    except ValueError:
        return response.text or response.reason_phrase, response.text
    detail = body.get("detail") if isinstance(body, dict) else None
    return (detail if isinstance(detail, str) else str(detail or body)), body


def jittered(seconds: float) -> float:
    """A wait up to a quarter longer at random: many clients that hear the same 503, or lose the
    same connection, do not all come back at the same instant."""
    return seconds * random.uniform(1.0, 1.25)


def send(http: httpx.Client, method: str, path: str, *, idempotent: bool, retries: int,
         backoff: float, **kw) -> httpx.Response:  # fmt: skip
    """One call, retried after connection errors as :mod:`clients.client`'s docstring says:
    ``retries`` times at most, after ``backoff * 2**k`` seconds capped at 5."""
    retryable = httpx.TransportError if idempotent else _NOT_SENT
    for attempt in range(retries + 1):
        try:
            response = http.request(method, path, **kw)
        except retryable as error:
            if attempt == retries:
                raise
            delay = jittered(min(5.0, backoff * 2**attempt))
            log.warning("%s %s: %s; retrying in %.2f s", method, path, error, delay)
            time.sleep(delay)
            continue
        # 503 with Retry-After: the store is out of reach, or every worker is busy; 429: the
        # campaign has as many model calls out as it may (another thread's, or client's)
        if (response.status_code not in (429, 503) or "Retry-After" not in response.headers
                or not idempotent or attempt == retries):  # fmt: skip
            return response
        delay = jittered(min(LONGEST_RETRY_AFTER, float(response.headers["Retry-After"])))
        log.warning("%s %s: %d %s; retrying in %.2f s", method, path, response.status_code,
                    answer_detail(response)[0], delay)  # fmt: skip
        time.sleep(delay)
    raise AssertionError("unreachable")


def call(http: httpx.Client, method: str, path: str, *, idempotent: bool = True, ok=(200,),
         retries: int, backoff: float, **kw) -> httpx.Response:  # fmt: skip
    """:func:`send`, and an answer whose status is not in ``ok`` raised as
    :class:`~clients.errors.ApiError`."""
    response = send(http, method, path, idempotent=idempotent, retries=retries, backoff=backoff,
                    **kw)  # fmt: skip
    if response.status_code not in ok:
        detail, body = answer_detail(response)
        raise ApiError(response.status_code, detail, body)
    return response
