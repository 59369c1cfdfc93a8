"""The client's transport: one HTTP call, retried where it is safe (:func:`send`), its non-2xx
answer raised as :class:`~clients.errors.ApiError` (:func:`call`), the jittered waits between
tries, which :mod:`clients.runner` uses too, and the JSON bodies of points and numbers.

Retries, and why they are safe where they happen:

- Connection errors (the API restarting, a dropped connection) are retried with exponential
  backoff (each wait up to a quarter longer at random, so that many clients do not come back
  at the same instant; so are the waits for ``Retry-After`` below) on *idempotent* calls:
  GETs (``/next`` with an ``Idempotency-Key``: sent again, it gets the ticket it got, not a
  second one), DELETE, ``/label`` (the same ``y`` on the same ticket is answered 200, never stored
  twice), ``/fail``, ``/abandon`` and ``/renew`` (the same report again is answered 200),
  ``POST .../observations`` (it carries an ``Idempotency-Key``: sent again, it is stored once)
  and the read-only model calls ``/predict``, ``/acquisition``, ``/evaluate``. ``POST
  /campaigns`` creates one more each time, so it is retried only when the request never
  reached the server (a refused or timed-out connect).
- A 503 with ``Retry-After`` (the service cannot reach its Redis for a moment, or every
  worker was too busy to take a ``/predict``, ``/acquisition`` or ``/evaluate`` job within
  ``FBGP_JOB_WAIT_SECONDS``), or a 429 with ``Retry-After`` (the campaign has as many model
  calls out as it may, ``FBGP_LIMIT_MODEL_CALLS``), is retried after that many seconds, on
  idempotent calls, as many times as connection errors are.
- ``/next`` answers 202 with ``Retry-After`` while no point can be given (the model that must
  choose it is being fitted): :meth:`FbgpClient.next_point` asks again, long-polling with
  ``?wait=`` or sleeping what ``Retry-After`` asks, until a point comes or the campaign is done.
"""

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


def send(
    http: httpx.Client,
    method: str,
    path: str,
    *,
    idempotent: bool,
    retries: int,
    backoff: float,
    **kw,
) -> httpx.Response:
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
        if (
            response.status_code not in (429, 503)
            or "Retry-After" not in response.headers
            or not idempotent
            or attempt == retries
        ):
            return response
        delay = jittered(min(LONGEST_RETRY_AFTER, float(response.headers["Retry-After"])))
        log.warning(
            "%s %s: %d %s; retrying in %.2f s",
            method,
            path,
            response.status_code,
            answer_detail(response)[0],
            delay,
        )
        time.sleep(delay)
    raise AssertionError("unreachable")


def call(
    http: httpx.Client,
    method: str,
    path: str,
    *,
    idempotent: bool = True,
    ok=(200,),
    retries: int,
    backoff: float,
    **kw,
) -> httpx.Response:
    """:func:`send`, and an answer whose status is not in ``ok`` raised as
    :class:`~clients.errors.ApiError`."""
    response = send(
        http, method, path, idempotent=idempotent, retries=retries, backoff=backoff, **kw
    )
    if response.status_code not in ok:
        detail, body = answer_detail(response)
        raise ApiError(response.status_code, detail, body)
    return response


def points_body(x) -> list[list]:
    """``x`` ``[m, d]`` (a list or a numpy array) as plain lists for JSON: numbers as floats,
    text (a choice input's value) as it is."""
    return [[str(v) if isinstance(v, str) else float(v) for v in row] for row in x]


def numbers_body(value, kind=float):
    """A label's number (``kind`` float) or list of numbers (``kind`` list) as JSON floats, or
    a dict of them by output name."""
    if isinstance(value, dict):
        return {str(k): numbers_body(v, kind) for k, v in value.items()}
    return [float(v) for v in value] if kind is list else float(value)
