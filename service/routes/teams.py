"""Teams of a shared stack: the service token's holder makes a team and hands it its token,
which creates campaigns, lists the team's own and opens those (as their owner token does),
and nothing of another team's."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Path, Response

from fbgp_al.service.deps import Authorized, SettingsDep, StoreDep
from fbgp_al.service.refusals import Conflict, NotFound
from fbgp_al.service.schemas.problems import problem_responses
from fbgp_al.service.schemas.teams import Team, TeamCreate, TeamToken

TeamName = Annotated[str, Path(description="The team's name.")]

router = APIRouter(prefix="/teams", tags=["teams"], dependencies=[Authorized])
OPEN = (
    "the service is open (FBGP_API_TOKEN is not set): every call is allowed without a "
    "token, so a team's token would keep nothing apart; set FBGP_API_TOKEN first"
)


def _guarded(settings) -> None:
    if not settings.api_token:
        raise Conflict(OPEN)


@router.post("", status_code=201, response_model=TeamToken, responses=problem_responses(409))
def create(body: TeamCreate, store: StoreDep, settings: SettingsDep, response: Response):
    """A new team and its token, shown once (only its SHA-256 is kept); 409 if the name is
    taken."""
    _guarded(settings)
    token = store.teams.create(body.name, time.time())
    if token == 0:
        raise Conflict(
            f"a team named {body.name!r} exists already (POST /teams/{body.name}/"
            "token gives it a new token)"
        )
    if token == -1:
        raise Conflict(
            f"team {body.name!r} was deleted and still holds campaigns: POST "
            f"/teams/{body.name}/token makes it live again with a new token, or "
            "choose another name"
        )
    response.headers["Cache-Control"] = "no-store"
    return {"name": body.name, "token": token}


@router.get("", response_model=list[Team])
def list_teams(store: StoreDep):
    """Every team, by name, with its campaigns' count."""
    return store.teams.all()


@router.post("/{name}/token", response_model=TeamToken, responses=problem_responses(404, 409))
def rotate(name: TeamName, store: StoreDep, settings: SettingsDep, response: Response):
    """A new token for the team, shown once; its old token stops working at once. A deleted
    team that still holds campaigns is live again."""
    _guarded(settings)
    token = store.teams.rotate_token(name)
    if token is None:
        raise NotFound(f"no team {name!r}")
    response.headers["Cache-Control"] = "no-store"
    return {"name": name, "token": token}


@router.delete(
    "/{name}", status_code=204, response_class=Response, responses=problem_responses(404)
)
def delete(name: TeamName, store: StoreDep):
    """The team's token ends at once; its campaigns stay (the service token and their own
    tokens open them). A team that holds campaigns stays listed, not live, and its name cannot
    be made anew: a rotation of its token makes it live again. 404 if no live team has the
    name."""
    if not store.teams.delete(name):
        raise NotFound(f"no live team {name!r}")
    return Response(status_code=204)
