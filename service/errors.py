"""Errors as ``application/problem+json`` (RFC 9457): the domain's refusals
(:mod:`service.refusals`), each mapped to its HTTP status here, the credentials' errors, and the
framework's (unknown routes, methods, invalid bodies, Redis out of reach,
anything unforeseen) mapped the same way."""

from __future__ import annotations

import logging
from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from redis.exceptions import BusyLoadingError, OutOfMemoryError, RedisError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from fbgp_al.service.refusals import (
    Busy,
    Conflict,
    Gone,
    JobFailed,
    NotFound,
    Refusal,
    TooLarge,
    TooMany,
    Unprocessable,
)
from fbgp_al.service.settings import get_settings

log = logging.getLogger("fbgp.api")


class ServiceError(Exception):
    """A request refused for what HTTP itself says (its credentials); ``status`` is its HTTP
    status. The domain's refusals are :class:`service.refusals.Refusal`."""

    status = 500

    def __init__(self, detail: str, headers: dict[str, str] | None = None):
        super().__init__(detail)
        self.detail = detail
        self.headers = headers or {}


class Unauthorized(ServiceError):
    status = 401


class Forbidden(ServiceError):
    status = 403


# Each refusal of the domain (service.refusals) and its HTTP status: the first class along an
# error's MRO found here
REFUSAL_STATUS: dict[type[Refusal], int] = {
    NotFound: 404,
    Conflict: 409,
    Gone: 410,
    TooLarge: 413,
    Unprocessable: 422,
    TooMany: 429,
    JobFailed: 500,
    Busy: 503,
}


def refusal_status(error: Refusal) -> int:
    """The HTTP status of a refusal (:data:`REFUSAL_STATUS`; 500 for one it does not list)."""
    for cls in type(error).__mro__:
        if cls in REFUSAL_STATUS:
            return REFUSAL_STATUS[cls]
    return 500


def problem(status: int, detail: str, headers: dict | None = None, **more) -> JSONResponse:
    body = {
        "type": "about:blank",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        **more,
    }
    return JSONResponse(
        body, status_code=status, headers=headers, media_type="application/problem+json"
    )


def _service_error(request: Request, error: ServiceError):
    return problem(error.status, error.detail, error.headers)


def _refused(request: Request, error: Refusal):
    headers = None if error.retry_after is None else {"Retry-After": str(error.retry_after)}
    return problem(refusal_status(error), error.detail, headers)


def _http_error(request: Request, error: StarletteHTTPException):
    headers = dict(getattr(error, "headers", None) or {})
    detail = str(error.detail)
    if error.status_code == 405:  # Starlette's Allow names one route's methods, not the path's
        allowed = sorted(_methods_of(request))
        headers["Allow"] = ", ".join(allowed)
        detail = f"{request.method} is not supported here; use {' or '.join(allowed)}"
    return problem(error.status_code, detail, headers)


def _methods_of(request: Request) -> set[str]:
    """The methods some route serves at the request's path."""
    methods = ("GET", "POST", "PUT", "PATCH", "DELETE")
    return {
        m
        for m in methods
        if any(
            route.matches({**request.scope, "method": m})[0] == Match.FULL
            for route in request.app.router.routes
        )
    }


def _invalid(request: Request, error: RequestValidationError):
    # FastAPI's own handler echoes the input, which fails on NaN and infinity: say what is wrong
    errors = [
        {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
        for e in error.errors()
    ]
    message = "; ".join(
        f"{'.'.join(str(p) for p in e['loc'][1:]) or 'body'}: {e['msg']}" for e in errors
    )
    return problem(422, message or "invalid request", errors=errors)


def store_unreachable(request: Request | None, error: RedisError):
    """503 with ``Retry-After`` for Redis out of reach, loading its data after a restart
    (``BusyLoadingError``), or refusing writes: for the routes (this module's handler) and for
    the middleware before them (:class:`service.middleware.StoreOutage`)."""
    log.error("Redis: %s", error)
    retry = str(get_settings().store_retry_after_seconds)
    if isinstance(error, OutOfMemoryError) or str(error).startswith("MISCONF"):
        # at its maxmemory, or unable to write its append-only file: nothing was stored
        return problem(
            503,
            f"the store refuses writes ({type(error).__name__}: Redis's memory "
            "or disk is full, GET /readyz says which); nothing was stored, try again "
            "later",
            {"Retry-After": retry},
        )
    if isinstance(error, BusyLoadingError):
        return problem(
            503,
            "the store is loading its data (Redis restarted); try again shortly",
            {"Retry-After": retry},
        )
    return problem(
        503,
        f"the store is unreachable ({type(error).__name__}); try again shortly",
        {"Retry-After": retry},
    )


def _server_error(request: Request, error: Exception):
    log.error("unhandled error", exc_info=error)
    return problem(500, f"internal error ({type(error).__name__}); the service log has details")


def install(app: FastAPI) -> None:
    """Every error the app answers, as problem+json."""
    app.add_exception_handler(ServiceError, _service_error)
    app.add_exception_handler(Refusal, _refused)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(RedisError, store_unreachable)
    app.add_exception_handler(Exception, _server_error)
