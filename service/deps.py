"""The routes' dependencies, as ``Annotated`` aliases: settings, the Redis connection, the
campaign store, and the bearer-token check."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, Query, Request
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

PageToken = Annotated[str | None, Query(include_in_schema=False)]
bearer = HTTPBearer(auto_error=False, description="FBGP_API_TOKEN, or a campaign's own token")
Bearer = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


async def authorized(request: Request, settings: SettingsDep, store: StoreDep,
                     credentials: Bearer, token: PageToken = None) -> None:  # fmt: skip
    """With ``FBGP_API_TOKEN`` set, every call carries ``Authorization: Bearer <token>`` (a
    browser on the campaign pages may pass ``?token=``): the service's token opens everything,
    a campaign's token (returned when it was created) opens that campaign only (403 elsewhere).
    The service's token is compared in constant time; campaign tokens are looked up by their
    SHA-256. Without ``FBGP_API_TOKEN`` the service is open."""
    if not settings.api_token:
        return
    # a campaign token is looked up in Redis: in the thread pool
    await run_in_threadpool(_check_token, request, settings, store, credentials, token)


def _check_token(request: Request, settings: Settings, store: CampaignStore,
                 credentials: HTTPAuthorizationCredentials | None,
                 token: str | None) -> None:  # fmt: skip
    given = credentials.credentials if credentials else token
    if not given:
        raise Unauthorized("this call needs Authorization: Bearer <token>",
                           {"WWW-Authenticate": "Bearer"})  # fmt: skip
    if hmac.compare_digest(given.encode(), settings.api_token.encode()):
        return
    owner = store.token_owner(given)
    if owner is None:
        raise Unauthorized("the bearer token is not valid here",
                           {"WWW-Authenticate": 'Bearer error="invalid_token"'})  # fmt: skip
    campaign_id = request.path_params.get("campaign_id")
    if campaign_id != owner:
        where = f"campaign {campaign_id!r}" if campaign_id else "this call"
        raise Forbidden(f"the token is campaign {owner!r}'s: it does not open {where}")


Authorized = Depends(authorized)
