"""The routes' dependencies, as ``Annotated`` aliases: settings, the Redis connection, the
campaign store, and the token checks (the API's bearer token, the pages' token or cookie)."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Cookie, Depends, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from redis import Redis
from starlette.concurrency import run_in_threadpool

from service.errors import Forbidden, Unauthorized
from service.settings import Settings, get_settings
from service.store import CampaignStore

SettingsDep = Annotated[Settings, Depends(get_settings)]

_connections: dict[str, Redis] = {}


def connection(url: str) -> Redis:
    """One client (and its connection pool) per Redis URL, for the process's lifetime."""
    if url not in _connections:
        _connections[url] = Redis.from_url(url, socket_timeout=30, health_check_interval=30)
    return _connections[url]


# The dependencies are async where they do no I/O, so that a request (a long poll above all)
# takes no turn of the thread pool for them.
async def get_redis(settings: SettingsDep) -> Redis:
    return connection(settings.redis_url)


RedisDep = Annotated[Redis, Depends(get_redis)]


async def get_store(redis: RedisDep) -> CampaignStore:
    return CampaignStore(redis)


StoreDep = Annotated[CampaignStore, Depends(get_store)]

PAGE_COOKIE = "fbgp_token"  # the token a browser gave a page as ?token=, kept HttpOnly
bearer = HTTPBearer(auto_error=False, description="FBGP_API_TOKEN, or a campaign's own token")
Bearer = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
PageToken = Annotated[str | None, Query(include_in_schema=False)]
PageCookie = Annotated[str | None, Cookie(alias=PAGE_COOKIE, include_in_schema=False)]

SIMULATOR_CALLS = ("GET /next, POST /label, /fail, /abandon and /renew, and GET of the "
                   "campaign's status")  # fmt: skip


async def simulator_scope() -> None:
    """A route that a campaign's simulator token opens (``dependencies=[SimulatorScope]``);
    every other campaign route needs its owner token or the service token."""


SimulatorScope = Depends(simulator_scope)


async def authorized(request: Request, settings: SettingsDep, store: StoreDep,
                     credentials: Bearer) -> None:  # fmt: skip
    """With ``FBGP_API_TOKEN`` set, every call carries ``Authorization: Bearer <token>``: the
    service's token opens everything; a campaign's owner token opens that campaign only (403
    elsewhere); its simulator token opens only the routes marked :data:`SimulatorScope` of
    that campaign. The service's token is compared in constant time; campaign tokens are
    looked up by their SHA-256. Without ``FBGP_API_TOKEN`` the service is open."""
    if not settings.api_token:
        return
    if not credentials:
        pages = "; ?token= is taken on the HTML pages only"
        hint = pages if "token" in request.query_params else ""
        raise Unauthorized(f"this call needs Authorization: Bearer <token>{hint}",
                           {"WWW-Authenticate": "Bearer"})  # fmt: skip
    given = credentials.credentials
    known = getattr(request.state, "token_grant", None)  # the body's guard looked it up
    if known is not None and known[0] == given:
        _check_grant(request, known[1])
        return
    # a campaign token is looked up in Redis: in the thread pool
    await run_in_threadpool(_check_token, request, settings, store, given)


async def page_authorized(request: Request, settings: SettingsDep, store: StoreDep,
                          credentials: Bearer, token: PageToken = None,
                          cookie: PageCookie = None) -> None:  # fmt: skip
    """:func:`authorized` for the HTML pages, where a browser may also give the token as
    ``?token=`` (which the page exchanges for the :data:`PAGE_COOKIE` cookie) or in that
    cookie."""
    if not settings.api_token:
        return
    # a ?token= is checked before it is kept as the cookie
    given = token or (credentials.credentials if credentials else cookie)
    if not given:
        raise Unauthorized("this page needs a token: open it once with ?token=<token>",
                           {"WWW-Authenticate": "Bearer"})  # fmt: skip
    await run_in_threadpool(_check_token, request, settings, store, given)


SERVICE = ("", "service")  # the grant of the service's token: every campaign, every call
INVALID = "the bearer token is not valid here"


def identify(settings: Settings, store: CampaignStore, given: str) -> tuple[str, str] | None:
    """Whose token ``given`` is: :data:`SERVICE`, a campaign and its scope (``simulator`` or
    ``owner``), or None (no token of this service)."""
    if hmac.compare_digest(given.encode(), settings.api_token.encode()):
        return SERVICE
    return store.token_grant(given)


def _check_token(request: Request, settings: Settings, store: CampaignStore, given: str) -> None:
    _check_grant(request, identify(settings, store, given))


def _check_grant(request: Request, grant: tuple[str, str] | None) -> None:
    """401 for no grant, 403 for a campaign token outside its campaign or its scope."""
    if grant is None:
        raise Unauthorized(INVALID, {"WWW-Authenticate": 'Bearer error="invalid_token"'})
    if grant is SERVICE:
        return
    owner, scope = grant
    campaign_id = request.path_params.get("campaign_id")
    if campaign_id != owner:
        where = f"campaign {campaign_id!r}" if campaign_id else "this call"
        raise Forbidden(f"the token is campaign {owner!r}'s: it does not open {where}")
    if scope != "owner" and not _simulator_route(request):
        raise Forbidden(f"this call needs campaign {owner!r}'s owner token (or the service "
                        f"token); its simulator token opens only {SIMULATOR_CALLS}")  # fmt: skip


def _simulator_route(request: Request) -> bool:
    route = request.scope.get("route")
    return any(d.dependency is simulator_scope for d in getattr(route, "dependencies", ()))


Authorized = Depends(authorized)
PageAuthorized = Depends(page_authorized)
