"""The API's middleware: a request body limit, and one log line and two metrics per request."""

from __future__ import annotations

import logging
import time

from starlette.exceptions import HTTPException

from service.errors import problem
from service.observability import Metrics
from service.settings import get_settings

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
        extra = {"method": method, "route": route, "status": status,
                 "seconds": round(seconds, 6)}  # fmt: skip
        waited = scope.get("state", {}).get("waited")
        if waited is not None:
            extra["waited"] = round(waited, 6)
        campaign = scope.get("path_params", {}).get("campaign_id")
        if campaign:
            extra["campaign"] = campaign
        log.info("%s %s %d", method, route, status, extra=extra)
