"""Campaigns: create, list, status, delete."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from service import schemas
from service.deps import Authorized, StoreDep

MAX_PAGE = 1000  # the largest page of GET /campaigns?limit=
router = APIRouter(prefix="/campaigns", tags=["campaigns"], dependencies=[Authorized])


@router.post("", status_code=201, response_model=schemas.Campaign)
def create(body: schemas.CampaignCreate, store: StoreDep):
    spec = store.create(body.model_dump())
    token = store.issue_token(spec["id"])
    return dict(spec, status=store.status(spec["id"]), token=token)


LIST_RESPONSES = {200: {"headers": {
    "X-Next-Cursor": {"description": "the cursor of the next page; absent on the last page",
                      "schema": {"type": "string"}},
    "Link": {"description": 'the next page, as <...>; rel="next"', "schema": {"type": "string"}},
}}}  # fmt: skip


@router.get("", response_model=list[schemas.CampaignStatus], responses=LIST_RESPONSES)
def list_campaigns(store: StoreDep, request: Request, response: Response,
                   limit: Annotated[int | None, Query(ge=1, le=MAX_PAGE)] = None,
                   cursor: Annotated[str | None, Query(max_length=200)] = None):  # fmt: skip
    """The campaigns' status, by id. Without ``limit``, all of them; with it, a page of at most
    ``limit``, and, when more follow, the next page's ``cursor`` in ``X-Next-Cursor`` and a
    ``Link: <...>; rel="next"`` header (pass it as ``?cursor=``)."""
    ids, following = store.ids_page(cursor, limit)
    if following is not None:
        response.headers["X-Next-Cursor"] = following
        url = request.url.include_query_params(cursor=following, limit=limit)
        response.headers["Link"] = f'<{url}>; rel="next"'
    return store.statuses(ids)


@router.get("/{campaign_id}", response_model=schemas.CampaignStatus,
            responses=schemas.problem_responses(404))  # fmt: skip
def status(campaign_id: str, store: StoreDep):
    return store.status(campaign_id)


@router.delete("/{campaign_id}", status_code=204, response_class=Response,
               responses=schemas.problem_responses(404))  # fmt: skip
def delete(campaign_id: str, store: StoreDep):
    store.delete(campaign_id)
    return Response(status_code=204)
