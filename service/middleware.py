"""The API's middleware: a request body limit and deadline, one log line and two metrics per
request, 503 with ``Retry-After`` when Redis is out of reach before a route runs, and
``Connection: close`` on a 500."""

from __future__ import annotations

import asyncio
import logging
import time

from fastapi.routing import APIRoute
from redis.exceptions import RedisError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from fbgp_al.service import deps
from fbgp_al.service.errors import Forbidden, Unauthorized, problem, store_unreachable
from fbgp_al.service.observability import Metrics
from fbgp_al.service.settings import get_settings
from fbgp_al.service.store import CampaignStore

log = logging.getLogger("fbgp.api")
metrics = Metrics()  # this API process's request counts and latencies


class BodyLimit:
    """413 for a request body over ``max_body_bytes``: at once when Content-Length says so,
    else as soon as the streamed body grows past it."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = get_settings().max_body_bytes
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            detail = f"the request body is over {limit} bytes (FBGP_MAX_BODY_BYTES)"
            response = problem(413, detail) if length.isdigit() else problem(400, "bad length")
            return await response(scope, receive, send)
        seen = 0

        async def limited():
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:
                # an HTTPException, which FastAPI lets through as it reads the body
                raise HTTPException(413, f"the request body is over {limit} bytes")
            return message

        return await self.app(scope, limited, send)


class OffTheLoop(APIRoute):
    """A route whose request, when its body is over ``large_body_bytes`` (Content-Length), is
    parsed, validated and answered in a thread, on an event loop of its own: FastAPI parses
    and validates a body on the server's event loop, where a 14 MiB pool held every other
    request for 1.4 s, and four at once for 3.1 s (``fbgp-al bench-service --large-bodies``).
    The body is read on the server's loop first, under its limit and deadline; in the thread
    the loop is held only while one C call (a JSON parse) holds the interpreter."""

    def get_route_handler(self):
        handler = super().get_route_handler()

        async def route(request):
            length = request.headers.get("content-length", "")
            if not length.isdigit() or int(length) <= get_settings().large_body_bytes:
                return await handler(request)
            await request.body()  # kept by the request: the handler reads it from there
            return await run_in_threadpool(asyncio.run, handler(request))

        return route


class BodyAfterToken:
    """With ``FBGP_API_TOKEN`` set, a request with a body is answered before its body is read
    unless its token opens the call: 401 without a token of this service, 403 for a token
    that does not open this route of this campaign (the check of
    :func:`service.deps.check_grant`, which the route's dependency then takes as done).
    FastAPI reads and parses a body before the dependencies that check the token, so without
    this anyone, or any campaign's simulator, could make the API parse 16 MiB bodies.
    ``routes``: the app's routes (as its routers hold them), to match a request line to."""

    def __init__(self, app, routes=()):
        self.app = app
        self.routes = list(routes)

    async def __call__(self, scope, receive, send):
        settings = get_settings()
        if scope["type"] != "http" or not settings.api_token or not _has_body(scope):
            return await self.app(scope, receive, send)
        scheme, _, given = (
            dict(scope["headers"]).get(b"authorization", b"").decode("latin-1").partition(" ")
        )
        given = given.strip()
        if scheme.lower() != "bearer" or not given:
            response = problem(
                401, "this call needs Authorization: Bearer <token>", {"WWW-Authenticate": "Bearer"}
            )
            return await response(scope, receive, send)
        store = CampaignStore(deps.connection(settings))
        try:
            grant = await run_in_threadpool(self._grant_for, scope, settings, store, given)
        except (Unauthorized, Forbidden) as refused:
            response = problem(refused.status, refused.detail, refused.headers)
            return await response(scope, receive, send)
        if grant is not None:  # the routes' check takes this one, not a second look-up
            scope.setdefault("state", {})["token_grant"] = (given, grant)
        return await self.app(scope, receive, send)

    def _grant_for(self, scope, settings, store: CampaignStore, given: str):
        """Whose token ``given`` is, checked against the route the request line names; None
        where no route serves it (the app answers it); 401 or 403 raised."""
        grant = deps.identify(settings, store, given)
        route = deps.route_of(self.routes, scope)
        if grant is None or route is not None:
            deps.check_grant(store, grant, *(route or (None, None)))
        return None if route is None else grant


def _has_body(scope) -> bool:
    headers = dict(scope["headers"])
    length = headers.get(b"content-length")
    return b"transfer-encoding" in headers or (length is not None and length != b"0")


class BodyDeadline:
    """408 for a request body not all in within ``body_timeout_seconds`` of its headers (a
    client that sends it a byte at a time holds no connection for long); the connection is
    closed after it."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        seconds = get_settings().body_timeout_seconds
        deadline = time.monotonic() + seconds
        done = False

        async def timed():
            nonlocal done
            if done:  # the body is in: what follows is a disconnect, which may come any time
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                raise HTTPException(
                    408,
                    f"the request body was not all in within {seconds:g} s "
                    "(FBGP_BODY_TIMEOUT_SECONDS)",
                    headers={"Connection": "close"},
                ) from None
            done = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        return await self.app(scope, timed, send)


class StoreOutage:
    """503 with ``Retry-After`` (:func:`service.errors.store_unreachable`) for a Redis error
    raised in the middleware, outside the routes' error handlers: above all the look-up of a
    campaign's or a team's token before a body is read (:class:`BodyAfterToken`), which met a
    Redis that was restarting (down, or loading its append-only file) with a 500. Every route
    so answers the same while Redis is away, whether its token was checked here or in the
    route. An error after the response started is left to the server, as any other."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def sending(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except RedisError as error:
            if started:
                raise
            await store_unreachable(None, error)(scope, receive, send)


class CloseAfterError:
    """``Connection: close`` on every 500, so that a client is told that the connection ends
    rather than finding it closed (the server closes it after an unhandled error). It wraps the
    whole app, outside Starlette's error middleware, which answers such an error's 500."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def sending(message):
            if message["type"] == "http.response.start" and message["status"] == 500:
                headers = list(message.get("headers", []))
                if not any(k.lower() == b"connection" for k, _ in headers):
                    message = dict(message, headers=[*headers, (b"connection", b"close")])
            await send(message)

        return await self.app(scope, receive, sending)


class Observe:
    """Count and time each request by its route, and log it (with its campaign, and for a long
    poll the seconds it waited, ``waited``, that a route notes in ``scope["state"]``). A plain
    ASGI middleware: it adds no task and no stream per request, which at a thousand polls
    ending together is the event loop's time."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = time.perf_counter()
        status = 500  # unless a response starts: an error the server's outer layer answers

        async def sending(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            self.record(scope, status, time.perf_counter() - started)

    @staticmethod
    def record(scope, status: int, seconds: float) -> None:
        method = scope["method"]
        route = getattr(scope.get("route"), "path", "unmatched")
        metrics.requests.labels(method, route, str(status)).inc()
        metrics.latency.labels(method, route).observe(seconds)
        extra = {"method": method, "route": route, "status": status, "seconds": round(seconds, 6)}
        waited = scope.get("state", {}).get("waited")
        if waited is not None:
            extra["waited"] = round(waited, 6)
        campaign = scope.get("path_params", {}).get("campaign_id")
        if campaign:
            extra["campaign"] = campaign
        log.info("%s %s %d", method, route, status, extra=extra)
