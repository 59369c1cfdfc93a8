"""The routes' dependencies, as ``Annotated`` aliases: settings, the Redis connection, the
campaign store, and the token checks (the API's bearer token, the pages' token or cookie)."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Cookie, Depends, Path, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from redis import Redis
from starlette.concurrency import run_in_threadpool

from fbgp_al.service.errors import Forbidden, Unauthorized
from fbgp_al.service.settings import Settings, get_settings
from fbgp_al.service.store import CampaignStore
from fbgp_al.service.tokens import token_digest

SettingsDep = Annotated[Settings, Depends(get_settings)]
# the path parameter of every /campaigns/{campaign_id}/... route
CampaignId = Annotated[
    str, Path(description="The campaign's id, as `POST /campaigns` answered it (`id`).")
]

_connections: dict[tuple, Redis] = {}


def connection(settings: Settings) -> Redis:
    """One client (and its connection pool) per Redis URL and TLS files, for the process's
    lifetime."""
    key = redis_key(settings)
    if key not in _connections:
        _connections[key] = Redis.from_url(
            settings.redis_url,
            socket_timeout=30,
            health_check_interval=30,
            **settings.redis_options(),
        )
    return _connections[key]


def redis_key(settings: Settings) -> tuple:
    """What tells one Redis client of the settings from another: the URL and the TLS files
    (read as fields, so that a request's path calls nothing of the settings' module)."""
    return (
        settings.redis_url,
        settings.redis_ca_file,
        settings.redis_cert_file,
        settings.redis_key_file,
    )


# The dependencies are async where they do no I/O, so that a request (a long poll above all)
# takes no turn of the thread pool for them.
async def get_redis(settings: SettingsDep) -> Redis:
    return connection(settings)


RedisDep = Annotated[Redis, Depends(get_redis)]


async def get_store(redis: RedisDep) -> CampaignStore:
    return CampaignStore(redis)


StoreDep = Annotated[CampaignStore, Depends(get_store)]

PAGE_COOKIE = "fbgp_token"  # the token a browser gave a page as ?token=, kept HttpOnly
bearer = HTTPBearer(
    auto_error=False, description="FBGP_API_TOKEN, a team's token, or a campaign's own token"
)
Bearer = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
PageToken = Annotated[str | None, Query(include_in_schema=False)]
PageCookie = Annotated[str | None, Cookie(alias=PAGE_COOKIE, include_in_schema=False)]

SIMULATOR_CALLS = (
    "GET /next, POST /label, /fail, /abandon and /renew, and GET of the campaign's status"
)


async def simulator_scope() -> None:
    """A route that a campaign's simulator token opens (``dependencies=[SimulatorScope]``);
    every other campaign route needs its owner token or the service token."""


SimulatorScope = Depends(simulator_scope)


async def team_scope() -> None:
    """A route without a campaign that a team's token opens (``dependencies=[TeamScope]``):
    creating and listing campaigns; the routes of a campaign it created are open to it too."""


TeamScope = Depends(team_scope)


async def authorized(
    request: Request, settings: SettingsDep, store: StoreDep, credentials: Bearer
) -> None:
    """With ``FBGP_API_TOKEN`` set, every call carries ``Authorization: Bearer <token>``: the
    service's token opens everything; a team's token opens the routes marked
    :data:`TeamScope` and every route of the campaigns it created (403 elsewhere); a
    campaign's owner token opens that campaign only (403 elsewhere); its simulator token
    opens only the routes marked :data:`SimulatorScope` of that campaign. The grant is left
    in ``request.state.grant`` (:func:`team_of`). The service's token is compared in constant
    time; the others are looked up by their SHA-256. Without ``FBGP_API_TOKEN`` the service
    is open."""
    if not settings.api_token:
        return
    if not credentials:
        pages = "; ?token= is taken on the HTML pages only"
        hint = pages if "token" in request.query_params else ""
        raise Unauthorized(
            f"this call needs Authorization: Bearer <token>{hint}", {"WWW-Authenticate": "Bearer"}
        )
    given = credentials.credentials
    request.state.credential = given
    known = getattr(request.state, "token_grant", None)  # the body's guard looked it up
    if known is not None and known[0] == given:
        request.state.grant = known[1]  # and checked it against this route
        return
    # a campaign or team token is looked up in Redis: in the thread pool
    await run_in_threadpool(_check_token, request, settings, store, given)


async def page_authorized(
    request: Request,
    settings: SettingsDep,
    store: StoreDep,
    credentials: Bearer,
    token: PageToken = None,
    cookie: PageCookie = None,
) -> None:
    """:func:`authorized` for the HTML pages, where a browser may also give the token as
    ``?token=`` (which the page exchanges for the :data:`PAGE_COOKIE` cookie) or in that
    cookie."""
    if not settings.api_token:
        return
    # a ?token= is checked before it is kept as the cookie
    given = token or (credentials.credentials if credentials else cookie)
    if not given:
        raise Unauthorized(
            "this page needs a token: open it once with ?token=<token>",
            {"WWW-Authenticate": "Bearer"},
        )
    request.state.credential = given
    await run_in_threadpool(_check_token, request, settings, store, given)


SERVICE = ("", "service")  # the grant of the service's token: every campaign, every call
INVALID = "the bearer token is not valid here"
TEAM_CALLS = "POST and GET /campaigns, the index page, and the campaigns it created"


def identify(settings: Settings, store: CampaignStore, given: str) -> tuple[str, str] | None:
    """Whose token ``given`` is: :data:`SERVICE`, a campaign and its scope (``simulator`` or
    ``owner``), a team's name and ``team``, or None (no token of this service)."""
    if hmac.compare_digest(given.encode(), settings.api_token.encode()):
        return SERVICE
    return store.teams.token_grant(given)


def team_of(request: Request) -> str | None:
    """The team whose token opened this call (:func:`authorized`), or None: the service's
    token (or an open service)."""
    grant = getattr(request.state, "grant", None)
    return grant[0] if _is_team(grant) else None


def team_credential(request: Request) -> tuple[str, str] | None:
    """The team whose token opened this call and that token's SHA-256 (for the store to check
    that it is still the team's when it writes); None for any other token."""
    team = team_of(request)
    return None if team is None else (team, token_digest(request.state.credential))


def _is_team(grant: tuple[str, str] | None) -> bool:
    return grant is not None and grant[1] == "team"


def _check_token(request: Request, settings: Settings, store: CampaignStore, given: str) -> None:
    grant = identify(settings, store, given)
    check_grant(store, grant, request.scope.get("route"), request.path_params.get("campaign_id"))
    request.state.grant = grant


def route_of(routes, scope) -> tuple[object, str | None] | None:
    """Of ``routes`` (the app's, as its routers hold them), the one a request is for, and its
    ``campaign_id`` path parameter (None where it has none), matched from the request line
    alone, before the body is read; None for a path no route serves (the app answers it 404
    or 405)."""
    path, method = scope["path"], scope["method"]
    for route in routes:
        match = route.path_regex.match(path)
        if match is not None and method in route.methods:
            return route, match.groupdict().get("campaign_id")
    return None


def check_grant(
    store: CampaignStore, grant: tuple[str, str] | None, route, campaign_id: str | None
) -> None:
    """401 for no grant; 403 for a campaign token outside its campaign or its scope, and for a
    team token outside its campaigns and :data:`TeamScope` (a look-up in Redis when the call
    is a campaign's). ``route`` is the call's route, ``campaign_id`` its path's campaign. The
    body's guard (:class:`service.middleware.BodyAfterToken`) runs it before a body is read."""
    if grant is None:
        raise Unauthorized(INVALID, {"WWW-Authenticate": 'Bearer error="invalid_token"'})
    if grant is SERVICE:
        return
    owner, scope = grant
    if scope == "team":
        if campaign_id is None and not _marked(route, team_scope):
            raise Forbidden(
                f"this call needs the service token; the token of team {owner!r} "
                f"opens only {TEAM_CALLS}"
            )
        if campaign_id is not None and not store.teams.has(owner, campaign_id):
            raise Forbidden(
                f"the token of team {owner!r} does not open campaign "
                f"{campaign_id!r}: the team did not create it"
            )
        return
    if campaign_id != owner:
        where = f"campaign {campaign_id!r}" if campaign_id else "this call"
        raise Forbidden(f"the token is campaign {owner!r}'s: it does not open {where}")
    if scope != "owner" and not _marked(route, simulator_scope):
        raise Forbidden(
            f"this call needs campaign {owner!r}'s owner token (or the service "
            f"token); its simulator token opens only {SIMULATOR_CALLS}"
        )


def _marked(route, scope) -> bool:
    """Whether ``route`` carries the dependency ``scope`` (a route's mark)."""
    return any(d.dependency is scope for d in getattr(route, "dependencies", ()))


Authorized = Depends(authorized)
PageAuthorized = Depends(page_authorized)
