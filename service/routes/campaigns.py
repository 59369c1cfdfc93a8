"""Campaigns: create, list, status, delete."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from fbgp_al.service import limits
from fbgp_al.service.deps import (
    Authorized,
    CampaignId,
    SettingsDep,
    SimulatorScope,
    StoreDep,
    TeamScope,
    team_credential,
    team_of,
)
from fbgp_al.service.errors import Unauthorized
from fbgp_al.service.middleware import OffTheLoop
from fbgp_al.service.refusals import Conflict, Unprocessable
from fbgp_al.service.routes import bodies
from fbgp_al.service.schemas.campaigns import Campaign, CampaignCreate, CampaignStatus
from fbgp_al.service.schemas.failures import Retry
from fbgp_al.service.schemas.problems import problem_responses
from fbgp_al.service.schemas.stop_rule import Resume, check_stop
from fbgp_al.service.store import TeamFull, TeamGone
from fbgp_al.worker.vocabulary.fidelities import declared_inputs, with_level

MAX_PAGE = 1000  # the largest page of GET /campaigns?limit=
router = APIRouter(
    prefix="/campaigns", tags=["campaigns"], dependencies=[Authorized], route_class=OffTheLoop
)


@router.post("", status_code=201, response_model=Campaign, dependencies=[TeamScope])
def create(
    body: CampaignCreate,
    store: StoreDep,
    request: Request,
    response: Response,
    settings: SettingsDep,
):
    """The campaign, with its two tokens: ``token`` for its simulators (points, labels, failed
    runs, status) and ``owner_token`` for everything else of it. Created with a team's token,
    it is the team's (``team``): that token opens it, and lists it."""
    fields = with_level(body.model_dump())  # with fidelities, the level a coordinate
    limits.check_campaign(fields, settings)  # 422 beyond a limit on one campaign's work
    team = team_credential(request)
    try:
        spec = store.campaigns.create(fields, team, settings.limit_team_campaigns)
    except TeamFull as full:
        raise limits.team_full(str(full), settings.limit_team_campaigns) from None
    except TeamGone as gone:
        raise Unauthorized(
            f"the token of team {str(gone)!r} was replaced or the team deleted "
            "while this request ran",
            {"WWW-Authenticate": "Bearer"},
        ) from None
    token, owner_token = store.teams.issue_tokens(spec["id"])
    response.headers["Cache-Control"] = "no-store"  # it carries the tokens
    return dict(
        spec,
        inputs=declared_inputs(spec),
        status=bodies.status(store, spec["id"]),
        token=token,
        owner_token=owner_token,
    )


LIST_RESPONSES = {
    200: {
        "headers": {
            "X-Next-Cursor": {
                "description": "the cursor of the next page; absent on the last page",
                "schema": {"type": "string"},
            },
            "Link": {
                "description": 'the next page, as <...>; rel="next"',
                "schema": {"type": "string"},
            },
        }
    }
}


@router.get(
    "", response_model=list[CampaignStatus], responses=LIST_RESPONSES, dependencies=[TeamScope]
)
def list_campaigns(
    store: StoreDep,
    request: Request,
    response: Response,
    limit: Annotated[
        int | None,
        Query(ge=1, le=MAX_PAGE, description=("Campaigns per page; absent: all of them.")),
    ] = None,
    cursor: Annotated[
        str | None,
        Query(
            max_length=200,
            description=("Where the page starts: the previous page's `X-Next-Cursor`."),
        ),
    ] = None,
):
    """The campaigns' status, by id. Without ``limit``, all of them; with it, a page of at most
    ``limit``, and, when more follow, the next page's ``cursor`` in ``X-Next-Cursor`` and a
    ``Link: <...>; rel="next"`` header (pass it as ``?cursor=``). A team's token lists the
    team's campaigns only."""
    ids, following = store.campaigns.ids_page(cursor, limit, team_of(request))
    if following is not None:
        response.headers["X-Next-Cursor"] = following
        url = request.url.include_query_params(cursor=following, limit=limit)
        response.headers["Link"] = f'<{url}>; rel="next"'
    return bodies.statuses(store, ids)


@router.get(
    "/{campaign_id}",
    response_model=CampaignStatus,
    responses=problem_responses(404),
    dependencies=[SimulatorScope],
)
def status(campaign_id: CampaignId, store: StoreDep):
    """Where the campaign stands: its state, counts of labels, tickets out, failed and
    abandoned runs, its refit, and its inputs. The simulator token opens it too."""
    return bodies.status(store, campaign_id)


@router.delete(
    "/{campaign_id}", status_code=204, response_class=Response, responses=problem_responses(404)
)
def delete(campaign_id: CampaignId, store: StoreDep):
    """The campaign and all its data; its jobs, running or queued, are stopped."""
    store.campaigns.delete(campaign_id)
    return Response(status_code=204)


@router.post(
    "/{campaign_id}/retry",
    status_code=202,
    response_model=CampaignStatus,
    responses=problem_responses(404, 409),
)
def retry(campaign_id: CampaignId, store: StoreDep, body: Retry | None = None):
    """The owner's word that what stopped the campaign is fixed. A failed campaign (its refit
    failed ``refit_max_attempts`` times in a row): its failed state cleared and a refit
    enqueued on all its labels. A failing one (more failed runs than ``max_failures`` since the
    last retry) or a stalled one (every point left failed for good, or below the failure
    model's `min_success`): its failed runs forgiven (``n_forgiven``; they count no more towards
    ``failing``, and stay in its failures), so ``/next`` hands out points again, those failed
    for good among them, after a refit that ranks them. The failure model keeps their evidence,
    so points where runs failed stay weighed down (and left out below `min_success`): a retry
    does not send runs back to the same crashes. With `{"forget_failures": true}` (the
    simulator changed) it forgets them too, and any campaign with a failed run may be told so.
    409 if there is nothing to retry."""
    forget = body is not None and body.forget_failures
    if not store.refits.retry(campaign_id, time.time(), forget):
        raise Conflict(
            "the campaign has not failed, is not failing and has not stalled: "
            "there is nothing to retry"
        )
    return bodies.status(store, campaign_id)


@router.post(
    "/{campaign_id}/resume",
    response_model=CampaignStatus,
    responses=problem_responses(404, 409, 422),
)
def resume(campaign_id: CampaignId, store: StoreDep, body: Resume | None = None):
    """A campaign its stopping rule stopped goes on (up to ``max_labels``): ``/next`` hands out
    points again, and the rule's ``patience`` counts from the next model. With a body
    ``{"stop": {...}}`` the rule is replaced (``{"stop": null}``: removed); without one it is
    kept. 409 if the campaign was not stopped by its rule (nor when its labels' cost reached
    its `max_cost`)."""
    stopped = bodies.status(store, campaign_id)["stopped_by"]
    if stopped and stopped["rule"] == "max_cost":
        raise Conflict("the campaign's labels cost its max_cost: a resume does not raise it")
    replace = body is not None and "stop" in body.model_fields_set
    stop = body.stop if replace else None
    if replace:
        try:
            check_stop(stop, store.campaigns.spec(campaign_id)["max_labels"])
        except ValueError as error:
            raise Unprocessable(str(error)) from None
    rule = stop.model_dump() if stop is not None else None
    if not store.models.resume(campaign_id, rule, replace):
        raise Conflict("the campaign was not stopped by its stopping rule: nothing to resume")
    return bodies.status(store, campaign_id)
