"""Campaigns: create, list, status, delete."""

from __future__ import annotations

import contextlib

from fastapi import APIRouter, Response

from service import schemas
from service.deps import Authorized, StoreDep
from service.errors import NotFound

router = APIRouter(prefix="/campaigns", tags=["campaigns"], dependencies=[Authorized])


@router.post("", status_code=201, response_model=schemas.Campaign)
def create(body: schemas.CampaignCreate, store: StoreDep):
    spec = store.create(body.model_dump())
    token = store.issue_token(spec["id"])
    return dict(spec, status=store.status(spec["id"]), token=token)


@router.get("", response_model=list[schemas.CampaignStatus])
def list_campaigns(store: StoreDep):
    out = []
    for campaign_id in store.ids():
        with contextlib.suppress(NotFound):  # deleted meanwhile
            out.append(store.status(campaign_id))
    return out


@router.get("/{campaign_id}", response_model=schemas.CampaignStatus,
            responses=schemas.problem_responses(404))  # fmt: skip
def status(campaign_id: str, store: StoreDep):
    return store.status(campaign_id)


@router.delete("/{campaign_id}", status_code=204, response_class=Response,
               responses=schemas.problem_responses(404))  # fmt: skip
def delete(campaign_id: str, store: StoreDep):
    store.delete(campaign_id)
    return Response(status_code=204)
