"""A remote simulator in a few lines: ask the service for a point, run ``f``, post the label.

``run_simulator(url, campaign_id, f)`` needs only a function ``f(x) -> y``; in a campaign with
fidelities ``f(x, fidelity=name) -> y``, the level to run ``x`` at (its name); in a campaign with
several outputs ``f`` returns ``{name: y}`` (or ``{"y": {name: y}, "noise": {name: variance}}``,
``{"y_replicates": {name: [..]}}``); in a campaign with
known noise ``f`` returns ``(y, noise)`` (``noise``: the variance of ``y``), ``{"y": .., "noise":
..}`` or ``{"y_replicates": [..]}`` (runs at the point: the service takes their mean and the
variance of that mean). Through
:class:`clients.client.FbgpClient` it long-polls ``/next``, honours 202 and ``Retry-After``,
retries connection errors, and stops when the campaign is done (410).

When ``f`` raises (or returns a value that is not a finite number), the ticket is reported
failed with the exception's type and message as its reason (``POST .../fail``) and the runner
goes on with the next point; ``on_error="raise"`` reports it and then raises. Ctrl-C
(KeyboardInterrupt, or any other BaseException that is not an Exception) abandons the ticket
held (``POST .../abandon``: its point is offered again at once) and is raised again.

While ``f`` runs, its ticket's lease is renewed (``POST .../renew``) whenever a third of it has
passed, so that a run longer than the campaign's ``lease_seconds`` keeps its point. A computed
label is posted until the service confirms it, for up to :data:`LABEL_PATIENCE` seconds of the
service being out of reach (the post is idempotent); should it stay unconfirmed, or should
Ctrl-C come meanwhile, the ticket and the label are logged at ERROR, to be posted again (a late
label is taken while its point has none). A label the service refuses because its point was
labeled under another ticket (409), or whose ticket was pruned (404), is logged and the runner
goes on; one it finds malformed (422) gives the ticket back and is raised.
"""

from __future__ import annotations

import inspect
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

import httpx

from fbgp_al.clients.client import MAX_REASON, ApiError, FbgpClient, LabelResult, NextPoint
from fbgp_al.clients.transport import jittered

log = logging.getLogger("fbgp.runner")

LABEL_PATIENCE = 900.0  # seconds a computed label is posted again while the service is away
RENEW_BOUNDS = (1.0, 600.0)  # seconds between a long run's renewals (a third of its lease)


class _Stopping(Exception):
    """``should_stop()`` became true while the runner waited for a point."""


def failure_reason(error: BaseException) -> str:
    """The reason reported for a run that raised ``error``: its type and message."""
    return f"{type(error).__name__}: {error}"[:MAX_REASON]


def run_simulator(
    url: str,
    campaign_id: str,
    f: Callable[[list], float | tuple[float, float] | dict],
    *,
    token: str | None = None,
    wait: float = 20.0,
    max_labels: int | None = None,
    on_label: Callable[[list, float, int], None] | None = None,
    on_error: Literal["fail", "raise"] = "fail",
    on_failure: Callable[[list, str], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> int:
    """Label points of campaign ``campaign_id`` with ``f`` until it is done (or ``max_labels``
    labels were posted here, or ``should_stop()`` is true). Returns the number of labels this
    call posted. ``f`` gets the point ``x`` as a list of its values, one per input: a float, an
    int input's integer, a choice input's value (a string or a number); in a campaign with
    fidelities also ``fidelity=``, the name of the level to run it at (a TypeError, its
    ticket given back, if ``f`` takes no such keyword).

    ``token``: the bearer token (default ``FBGP_API_TOKEN``): the campaign's simulator token
    (:attr:`~clients.client.Campaign.token`) is enough; ``wait``: seconds per long poll;
    ``on_label(x, y, n_labeled)`` is called after each stored label, ``on_failure(x, reason)``
    after each failure reported. ``on_error``: ``"fail"`` reports a run whose ``f`` raised as
    failed and goes on; ``"raise"`` reports it, then raises. A point handed out after
    ``should_stop()`` became true is abandoned. A campaign whose points have all failed answers
    ``/next`` with 409, raised as :class:`~clients.client.ApiError`.
    """
    if on_error not in ("fail", "raise"):
        raise ValueError(f"on_error must be 'fail' or 'raise', not {on_error!r}")
    posted = 0
    stopping = should_stop or (lambda: False)

    def give_up_if_stopping(_pending) -> None:
        if stopping():
            raise _Stopping()

    with FbgpClient(url, token) as api:
        while max_labels is None or posted < max_labels:
            if stopping():
                break
            try:
                point = api.next_point(campaign_id, wait=wait, on_wait=give_up_if_stopping)
            except _Stopping:
                break
            if point is None:
                break
            if stopping():
                _abandon(api, campaign_id, point)
                break
            if point.fidelity is not None and not takes_fidelity(f):
                _abandon(api, campaign_id, point)
                raise TypeError(
                    "the campaign has fidelities: the simulator must take the level's name, "
                    "f(x, fidelity=...)"
                )
            with _renewed(url, token, campaign_id, point):
                label = _run(api, campaign_id, point, f, on_error, on_failure)
            if label is None:
                continue
            try:
                answer = post_label(api, campaign_id, point, label)
            except ApiError as error:
                if error.status_code == 410:  # others filled the campaign meanwhile
                    break
                raise
            if answer is None:  # refused: its point was labeled under another ticket
                continue
            posted += 1
            if on_label:
                on_label(point.x, answer.y, answer.n_labeled)
    return posted


def post_label(
    api: FbgpClient,
    campaign_id: str,
    point: NextPoint,
    label: dict,
    patience: float = LABEL_PATIENCE,
) -> LabelResult | None:
    """Post ``point``'s computed ``label`` until the service answers: the stored label; None
    when it is refused for good because its point has a label under another ticket (409) or
    its ticket is gone (404), both logged. A label the service refuses otherwise (422: not
    the campaign's kind of output; 401, 403) gives the ticket back and raises; a 410 (the
    campaign is done) raises. While the service is out of reach (connection errors, 503, 429)
    it is posted again, with backoff, for ``patience`` seconds. Whenever it raises (Ctrl-C
    included) but on a 410, the ticket and the label are logged at ERROR first."""
    deadline = time.monotonic() + patience
    delay = 1.0
    try:
        while True:
            try:
                return api.label(campaign_id, point.ticket, **label)
            except ApiError as error:
                if error.status_code in (404, 409):
                    log.warning(
                        "the label of %s was not stored (%d: %s)",
                        point.x,
                        error.status_code,
                        error.detail,
                    )
                    return None
                if error.status_code not in (429, 503) or time.monotonic() >= deadline:
                    if error.status_code not in (410, 429, 503):
                        _abandon(api, campaign_id, point)
                    raise
                log.warning(
                    "the label of %s: %d %s; posting it again in %.0f s",
                    point.x,
                    error.status_code,
                    error.detail,
                    delay,
                )
            except httpx.TransportError as error:
                if time.monotonic() >= deadline:
                    raise
                log.warning(
                    "the label of %s: %s; posting it again in %.0f s", point.x, error, delay
                )
            time.sleep(jittered(delay))
            delay = min(30.0, 2 * delay)
    except BaseException as error:
        if not (isinstance(error, ApiError) and error.status_code == 410):
            log.error(
                "the label of ticket %s (x = %s) was not stored: %s (%s: %s); a late "
                "label is taken while its point has none (POST /campaigns/%s/label)",
                point.ticket,
                point.x,
                label,
                type(error).__name__,
                error,
                campaign_id,
            )
        raise


@contextmanager
def _renewed(url: str, token: str | None, campaign_id: str, point: NextPoint) -> Iterator[None]:
    """Renew ``point``'s lease while the block runs, each time a third of it has passed
    (within :data:`RENEW_BOUNDS`), through a client of its own (opened at the first renewal:
    a short run makes no call). A lease that ended (409, 404) is logged and left; a renewal
    that fails otherwise is tried again at the next turn."""
    done = threading.Event()

    def every(expires_at: float) -> float:
        low, high = RENEW_BOUNDS
        return min(high, max(low, (expires_at - time.time()) / 3))

    def beat() -> None:
        api = None
        wait = every(point.expires_at)
        try:
            while not done.wait(wait):
                try:
                    api = api or FbgpClient(url, token, retries=2)
                    wait = every(api.renew(campaign_id, point.ticket))
                except ApiError as error:
                    if error.status_code in (404, 409):
                        log.warning("the lease of %s was not renewed: %s", point.x, error.detail)
                        return
                    log.warning("the lease of %s: %s; renewing again later", point.x, error)
                except httpx.HTTPError as error:
                    log.warning("the lease of %s: %s; renewing again later", point.x, error)
        finally:
            if api is not None:
                api.close()

    thread = threading.Thread(target=beat, name="lease-renewal", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=5.0)


def _finite(value, what: str) -> float:
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"f returned {what} {number}, not a finite number")
    return number


def label_of(value) -> dict:
    """What ``f`` returned as :meth:`~clients.client.FbgpClient.label`'s keywords: a number
    (``y``), a pair ``(y, noise)``, or a dict with ``y`` (and ``noise``) or ``y_replicates``.
    ValueError for anything else, or a number that is not finite (or a negative noise)."""
    if isinstance(value, tuple):
        if len(value) != 2:
            raise ValueError(f"f returned a tuple of {len(value)}; expected (y, noise)")
        value = {"y": value[0], "noise": value[1]}
    if not isinstance(value, dict):
        y = float(value)
        if not math.isfinite(y):
            raise ValueError(f"f returned {y}, not a finite number")
        return {"y": y}
    reserved = {"y", "noise", "y_replicates"}
    if value and not set(value) & reserved:
        value = {"y": value}  # several outputs: {name: value}
    unknown = set(value) - reserved
    if unknown:
        raise ValueError(
            f"f returned a dict with keys {sorted(unknown)}; expected y and noise, "
            "or y_replicates (or, with several outputs, {name: value} or y and "
            "noise as such dicts)"
        )
    if "y_replicates" in value:
        if "y" in value or "noise" in value:
            raise ValueError("f returned y_replicates with y or noise: they give both")
        runs = value["y_replicates"]
        if isinstance(runs, dict):
            return {
                "replicates": {
                    k: [_finite(v, f"a replicate of {k}") for v in vs] for k, vs in runs.items()
                }
            }
        return {"replicates": [_finite(v, "a replicate") for v in runs]}
    if "y" not in value:
        raise ValueError("f returned a dict without y")
    label = {"y": _each(value["y"], "y")}
    if value.get("noise") is not None:
        label["noise"] = _each(value["noise"], "noise")
        noises = label["noise"].values() if isinstance(label["noise"], dict) else [label["noise"]]
        if any(v < 0 for v in noises):
            raise ValueError(f"f returned noise {label['noise']}, a variance below 0")
    return label


def _each(value, what: str):
    """A finite number, or with several outputs a dict of them by name."""
    if isinstance(value, dict):
        if not value:
            raise ValueError(f"f returned an empty dict as {what}")
        return {str(k): _finite(v, f"{what}[{k!r}]") for k, v in value.items()}
    return _finite(value, what)


def _run(
    api: FbgpClient, campaign_id: str, point: NextPoint, f, on_error: str, on_failure
) -> dict | None:
    """``f(point.x)`` as the label's keywords (:func:`label_of`), or None once its failure is
    reported (raised again with ``on_error="raise"``); Ctrl-C abandons the ticket and is raised
    again."""
    try:
        if point.fidelity is not None:
            return dict(label_of(f(point.x, fidelity=point.fidelity)), fidelity=point.fidelity)
        return label_of(f(point.x))
    except Exception as error:
        reason = failure_reason(error)
        log.warning("run at %s failed: %s", point.x, reason)
        api.fail(campaign_id, point.ticket, reason)
        if on_failure:
            on_failure(point.x, reason)
        if on_error == "raise":
            raise
        return None
    except BaseException:
        _abandon(api, campaign_id, point)
        raise


def takes_fidelity(f) -> bool:
    """Whether ``f`` takes a keyword ``fidelity`` (or any keyword); True where its signature
    cannot be read."""
    try:
        parameters = inspect.signature(f).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(
        p.kind == p.VAR_KEYWORD
        or (p.name == "fidelity" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))
        for p in parameters
    )


def _abandon(api: FbgpClient, campaign_id: str, point: NextPoint) -> None:
    """Give the ticket back (best effort: on the way out, a lost abandon only means that its
    lease runs out instead)."""
    try:
        api.abandon(campaign_id, point.ticket)
    except (ApiError, httpx.HTTPError) as error:
        log.warning("ticket %s not abandoned: %s", point.ticket, error)
