"""The API's middleware: a request body limit, and one log line and two metrics per request."""

from __future__ import annotations

import logging
import time

from fastapi import Request
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


async def observe(request: Request, call_next):
    """Count and time the request by its route, and log it (with its campaign)."""
    started = time.perf_counter()
    response = await call_next(request)
    seconds = time.perf_counter() - started
    route = getattr(request.scope.get("route"), "path", "unmatched")
    metrics.requests.labels(request.method, route, str(response.status_code)).inc()
    metrics.latency.labels(request.method, route).observe(seconds)
    extra = {"method": request.method, "route": route, "status": response.status_code,
             "seconds": round(seconds, 6)}  # fmt: skip
    campaign = request.scope.get("path_params", {}).get("campaign_id")
    if campaign:
        extra["campaign"] = campaign
    log.info("%s %s %d", request.method, route, response.status_code, extra=extra)
    return response
