"""The labeling loop over HTTP: ``/next`` hands out points, ``/label`` takes their labels,
``/fail`` and ``/abandon`` end a ticket without one, ``/renew`` extends its lease,
``/observations`` imports and exports labels (and failures; as CSV by
:mod:`service.routes.csv_export`). The rules are :mod:`service.loop`'s; here they meet Redis
(:func:`service.offers.offer`, ``/next``'s story; :mod:`service.results`, a label's, a failed
run's and an abandon's; :func:`service.observations.arrive`, an import's) and HTTP
(:func:`label_status`, :func:`run_status`)."""

from __future__ import annotations

import functools
import json
import logging
import math
import time
from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from fbgp_al.service import loop, observations, results, wakeups
from fbgp_al.service.deps import Authorized, CampaignId, SettingsDep, SimulatorScope, StoreDep
from fbgp_al.service.loop import LabelOutcome, RenewOutcome, RunOutcome, Ticket
from fbgp_al.service.middleware import OffTheLoop
from fbgp_al.service.offers import offer
from fbgp_al.service.refusals import Conflict, Gone, NotFound
from fbgp_al.service.routes.csv_export import observations_csv
from fbgp_al.service.schemas.labeling import (
    FailPost,
    Imported,
    LabelAnswer,
    LabelPost,
    NextPoint,
    NotYet,
    ObservationList,
    Observations,
    Renewed,
    RunAnswer,
    TicketPost,
)
from fbgp_al.service.schemas.problems import problem_responses
from fbgp_al.service.settings import Settings
from fbgp_al.service.store import CampaignStore
from fbgp_al.worker.vocabulary import fidelities
from fbgp_al.worker.vocabulary.defaults import known_noise
from fbgp_al.worker.vocabulary.values import LabelValues

log = logging.getLogger("fbgp.api")
router = APIRouter(
    prefix="/campaigns/{campaign_id}",
    tags=["labeling"],
    dependencies=[Authorized],
    route_class=OffTheLoop,
)

DONE = "the campaign is done: it has max_labels labels"
STALLED = (
    "no point is left to offer: every point not labeled has failed more than max_retries "
    "times or has a probability of success below the failure model's min_success, and "
    "nothing is out (see the campaign's failures in GET .../observations); its owner can retry "
    "it with POST {url}/retry, which offers those points again where the failure model allows "
    '(with {{"forget_failures": true}} if the simulator changed: everywhere)'
)


def label_status(outcome: LabelOutcome, ticket: str) -> int:
    """A label's outcome over HTTP: the status code of a success; the error otherwise."""
    match outcome:
        case LabelOutcome.STORED:
            return 201
        case LabelOutcome.SAME_AGAIN:
            return 200
        case LabelOutcome.CONFLICT:
            raise Conflict(
                "this ticket has a different label, or its point is labeled (then "
                "the ticket has ended: its lease no longer holds a place)"
            )
        case LabelOutcome.UNKNOWN_TICKET:
            raise NotFound(f"unknown ticket {ticket!r}")
        case LabelOutcome.DONE:
            raise Gone(DONE)
    raise AssertionError(outcome)


def run_status(outcome: RunOutcome, ticket: str) -> int:
    """A failure or abandon's outcome over HTTP, as a label's: 201 stored, 200 the same again."""
    match outcome:
        case RunOutcome.STORED:
            return 201
        case RunOutcome.SAME_AGAIN:
            return 200
        case RunOutcome.CONFLICT:
            raise Conflict(
                "this ticket has ended otherwise: labeled, failed with another "
                "reason, abandoned, or superseded (its point was labeled under "
                "another ticket)"
            )
        case RunOutcome.UNKNOWN_TICKET:
            raise NotFound(f"unknown ticket {ticket!r}")
    raise AssertionError(outcome)


def _key_header(description: str):
    """An ``Idempotency-Key`` header: up to 200 visible ASCII characters (a UUID, usually)."""
    return Header(min_length=1, max_length=200, pattern=r"^[\x21-\x7e]+$", description=description)


IDEMPOTENCY_KEY = _key_header(
    "the same key sent again gets the same ticket while it is out (a request whose answer was lost)"
)
IMPORT_KEY = _key_header("the same import sent again with its key is stored once")
REPLAYED = "Idempotent-Replayed"

NEXT_RESPONSES = {
    202: {"description": "no point yet", "model": NotYet},
    **problem_responses(404, 409, 410),
}


@router.get(
    "/next",
    response_model=NextPoint,
    response_model_exclude_unset=True,
    responses=NEXT_RESPONSES,
    dependencies=[SimulatorScope],
)
async def next_point(
    campaign_id: CampaignId,
    request: Request,
    response: Response,
    store: StoreDep,
    settings: SettingsDep,
    wait: Annotated[
        float,
        Query(
            ge=0,
            allow_inf_nan=False,
            description=(
                "Seconds to wait for a point before answering 202 (a long poll; at "
                "most `FBGP_MAX_WAIT_SECONDS`, 60 by default)."
            ),
        ),
    ] = 0.0,
    idempotency_key: Annotated[str | None, IDEMPOTENCY_KEY] = None,
):
    """A point to label, or 202 once ``wait`` seconds passed without one. The poll holds no
    thread while it waits: it is woken when the campaign changes, and looks again at least
    every `FBGP_NEXT_POLL_SECONDS`. 410 when the campaign is done; 409 when it is failed,
    failing or stalled.

    With an `Idempotency-Key` header, the request sent again with the same key (its answer
    was lost) gets the same ticket, with `Idempotent-Replayed: true`, while that ticket is
    out; once it has ended or its lease has run out, the key asks for a new point.
    \f
    The poll's wake-ups are :mod:`service.wakeups`'; the seconds it spent waiting are noted
    for the request's log line (``waited``), so that its service time shows apart."""
    if idempotency_key is not None:
        replayed = await run_in_threadpool(
            store.tickets.replay, campaign_id, idempotency_key, time.time()
        )
        if replayed is not None:
            response.headers[REPLAYED] = "true"
            return _ticket_body(replayed)
    answer = await _next_answer(campaign_id, request, store, settings, wait)
    if idempotency_key is not None:
        answer = await run_in_threadpool(_keyed, store, campaign_id, idempotency_key, answer)
        if isinstance(answer, tuple):
            response.headers[REPLAYED] = "true"
            answer = answer[0]
    return _next_response(answer, campaign_id)


def _keyed(
    store: CampaignStore, campaign_id: str, key: str, answer: Ticket | loop.Answer
) -> Ticket | loop.Answer | tuple[Ticket]:
    """``answer`` for the request with Idempotency-Key ``key``: a ticket bound to the key, or
    the one a request sent before with the key got while this one waited (a 1-tuple: a
    replay)."""
    now = time.time()
    if isinstance(answer, Ticket):
        bound = store.tickets.claim(campaign_id, key, answer, now)
        return bound if bound.ticket == answer.ticket else (bound,)
    replayed = (
        store.tickets.replay(campaign_id, key, now) if isinstance(answer, loop.Wait) else None
    )
    return answer if replayed is None else (replayed,)


async def _next_answer(
    campaign_id: CampaignId, request: Request, store: CampaignStore, settings: Settings, wait: float
) -> Ticket | loop.Answer:
    """A ticket, or the answer in its place once ``wait`` seconds passed without one."""
    deadline = time.monotonic() + min(wait, settings.max_wait_seconds)
    request.state.waited = 0.0
    hub = wakeups.hub(settings)
    withdraw = functools.partial(store.tickets.withdraw, campaign_id)
    async with hub.waiting(campaign_id, withdraw) as waiters:
        while True:
            answer, seen = await waiters.look(
                lambda count: offer(store, campaign_id, time.time(), settings, count),
                lambda a: isinstance(a, loop.Wait),
                settings.next_poll_seconds,
            )
            left = deadline - time.monotonic()
            if isinstance(answer, loop.Wait) and left > 0:
                began = time.monotonic()
                try:
                    handed = await waiters.wait(seen, min(left, settings.next_poll_seconds))
                finally:
                    request.state.waited += time.monotonic() - began
                if handed is None:
                    continue
                answer = handed  # a ticket that another poll's look took for this one
            return answer


def _ticket_body(ticket: Ticket) -> dict:
    """A ticket as /next answers it: ``fidelity`` only in a campaign with fidelities."""
    body = asdict(ticket)
    if body["fidelity"] is None:
        del body["fidelity"]
    return body


def _next_response(answer: Ticket | loop.Answer, campaign_id: str):
    """What /next says of a look's answer: the ticket, 410, 409, or 202 with Retry-After; a
    410 or 409 says what the owner can call to go on."""
    if isinstance(answer, Ticket):
        return _ticket_body(answer)
    url = f"/campaigns/{campaign_id}"
    if isinstance(answer, loop.Done) and answer.stopped:
        verdict = json.loads(answer.stopped)
        if verdict["rule"] == "max_cost":
            raise Gone(
                f"the campaign is done: its labels cost {verdict['value']:g}, its max_cost "
                f"is {verdict['target']:g}"
            )
        raise Gone(
            f"the campaign is done: its stopping rule was met ({verdict['rule']} = "
            f"{verdict['value']:.4g} <= {verdict['target']:g} at model "
            f"{verdict['version']}); its owner can resume it with POST "
            f"{url}/resume"
        )
    if isinstance(answer, loop.Done):
        raise Gone(DONE)
    if isinstance(answer, loop.Stalled):
        raise Conflict(STALLED.format(url=url))
    if isinstance(answer, loop.Failed):
        raise Conflict(
            f"the campaign has failed ({answer.reason}); its owner can retry it "
            f"with POST {url}/retry"
        )
    if isinstance(answer, loop.Failing):
        raise Conflict(
            f"the campaign is failing: {answer.failed} runs failed, more than its "
            f"max_failures ({answer.limit}), so no point is handed out (labels for "
            "tickets out are still taken); once the simulator is fixed, its owner "
            f"can retry it with POST {url}/retry, which offers the failed "
            "points again"
        )
    retry = max(1, math.ceil(answer.seconds))
    return JSONResponse(
        {"detail": "no point can be given yet", "retry_after": retry},
        status_code=202,
        headers={"Retry-After": str(retry)},
    )


LABEL_RESPONSES = {
    200: {"description": "the same label again", "model": LabelAnswer},
    **problem_responses(404, 409, 410),
}


@router.post(
    "/label",
    status_code=201,
    response_model=LabelAnswer,
    response_model_exclude_none=True,
    responses=LABEL_RESPONSES,
    dependencies=[SimulatorScope],
)
def label(campaign_id: CampaignId, body: LabelPost, store: StoreDep, response: Response):
    """``y``; with known noise its ``noise`` variance too, or ``y_replicates``."""
    values = LabelValues(body.y, body.noise, replicates=body.y_replicates or False)
    outcome, n = results.label(store, campaign_id, body.ticket, values, time.time(), body.fidelity)
    response.status_code = label_status(outcome, body.ticket)
    return {"ticket": body.ticket, "y": values.y, "noise": values.noise, "n_labeled": n}


RUN_RESPONSES = {
    200: {"description": "the same report again", "model": RunAnswer},
    **problem_responses(404, 409),
}


@router.post(
    "/fail",
    status_code=201,
    response_model=RunAnswer,
    responses=RUN_RESPONSES,
    dependencies=[SimulatorScope],
)
def fail(campaign_id: CampaignId, body: FailPost, store: StoreDep, response: Response):
    """The ticket's run failed: its lease ends now. Its point is not offered again, unless the
    campaign's ``max_retries`` allows more runs of it. No model sees a failed run."""
    outcome, n = results.fail(store, campaign_id, body.ticket, body.reason, time.time())
    response.status_code = run_status(outcome, body.ticket)
    return {"ticket": body.ticket, "status": "failed", "reason": body.reason, "count": n}


@router.post(
    "/abandon",
    status_code=201,
    response_model=RunAnswer,
    responses=RUN_RESPONSES,
    dependencies=[SimulatorScope],
)
def abandon(campaign_id: CampaignId, body: TicketPost, store: StoreDep, response: Response):
    """The ticket is given up (its simulator stops): its lease ends now and its point is offered
    again."""
    outcome, n = results.abandon(store, campaign_id, body.ticket, time.time())
    response.status_code = run_status(outcome, body.ticket)
    return {"ticket": body.ticket, "status": "abandoned", "count": n}


@router.post(
    "/renew",
    response_model=Renewed,
    responses=problem_responses(404, 409),
    dependencies=[SimulatorScope],
)
def renew(campaign_id: CampaignId, body: TicketPost, store: StoreDep):
    """Extend a live lease to ``lease_seconds`` from now (a long run's heartbeat)."""
    outcome, expires_at = store.runs.renew(campaign_id, body.ticket, time.time())
    match outcome:
        case RenewOutcome.UNKNOWN_TICKET:
            raise NotFound(f"unknown ticket {body.ticket!r}")
        case RenewOutcome.ENDED:
            raise Conflict(
                "this ticket has ended: labeled, failed, abandoned, or superseded "
                "(its point was labeled under another ticket)"
            )
        case RenewOutcome.EXPIRED:
            raise Conflict(
                "the lease has expired: its point may be out again (a label for it "
                "is still taken while the point has none)"
            )
    return {"ticket": body.ticket, "expires_at": expires_at}


@router.post(
    "/observations",
    status_code=201,
    response_model=Imported,
    responses={
        200: {"description": "the same import again (its Idempotency-Key)", "model": Imported},
        **problem_responses(404, 409),
    },
)
def import_observations(
    campaign_id: CampaignId,
    body: Observations,
    store: StoreDep,
    settings: SettingsDep,
    response: Response,
    idempotency_key: Annotated[str | None, IMPORT_KEY] = None,
):
    """Labels for points labeled elsewhere, stored all or none. With an ``Idempotency-Key``,
    the same import sent again (its answer was lost) is answered 200 with what the first
    stored, and nothing is stored twice; the key sent with other observations is a 422."""
    arrived = observations.arrive(
        store,
        settings,
        campaign_id,
        body.x,
        body.y,
        body.noise,
        idempotency_key,
        time.time(),
        body.fidelity,
    )
    if arrived.again:
        response.status_code = 200
        response.headers[REPLAYED] = "true"
    return {"n_labeled": arrived.n_labeled, "imported": arrived.imported}


OBSERVATIONS_RESPONSES = {
    200: {"content": {"application/json": {}, "text/csv": {"schema": {"type": "string"}}}},
    **problem_responses(404),
}


@router.get(
    "/observations",
    response_model=ObservationList,
    response_model_exclude_none=True,
    responses=OBSERVATIONS_RESPONSES,
)
def export_observations(
    campaign_id: CampaignId,
    store: StoreDep,
    accept: Annotated[
        str | None, Header(description=("`text/csv` for CSV; JSON otherwise."))
    ] = None,
):
    """The labels (``x``, ``y``, ``noise`` with known noise, ``fidelity`` with fidelities) and
    the failed runs (``failures``); as CSV, one row per label (``status`` ``ok``) then one per
    failed run (``status`` ``failed``, ``y`` empty, the ``reason``), with a ``noise`` column
    after ``y`` in a campaign with known noise, a ``fidelity`` column after the inputs in one
    with fidelities."""
    spec = store.campaigns.spec(campaign_id)
    labels = store.labels.all(campaign_id)
    failures = [
        {k: f[k] for k in ("x", "ticket", "reason", "at")} for f in store.runs.failures(campaign_id)
    ]
    x, y = [label["x"] for label in labels], [label["y"] for label in labels]
    noise = [label.get("noise", 0.0) for label in labels] if known_noise(spec) else None
    if accept and "text/csv" in accept:  # with fidelities, the level is a column
        return Response(observations_csv(spec, x, y, noise, failures), media_type="text/csv")
    x, fidelity = fidelities.split(spec, x)
    if fidelity is not None:  # each failed run's level apart too, as each label's
        for failure in failures:
            failure["x"], failure["fidelity"] = failure["x"][:-1], failure["x"][-1]
    return {"x": x, "y": y, "noise": noise, "fidelity": fidelity, "failures": failures}
