"""Errors as ``application/problem+json`` (RFC 9457): the domain's exceptions, mapped to HTTP in
one handler, and the framework's (unknown routes, methods, invalid bodies, Redis out of reach,
anything unforeseen) mapped the same way."""

from __future__ import annotations

import contextlib
import logging
from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from redis.exceptions import BusyLoadingError, OutOfMemoryError, RedisError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from fbgp_al.service.settings import get_settings

log = logging.getLogger("fbgp.api")


class ServiceError(Exception):
    """A request the service cannot answer as asked; ``status`` is its HTTP status."""

    status = 500

    def __init__(self, detail: str, headers: dict[str, str] | None = None):
        super().__init__(detail)
        self.detail = detail
        self.headers = headers or {}


class BadRequest(ServiceError):
    status = 400


class Unauthorized(ServiceError):
    status = 401


class Forbidden(ServiceError):
    status = 403


class NotFound(ServiceError):
    """No such campaign, ticket, model or plot."""

    status = 404


class Conflict(ServiceError):
    status = 409


class Gone(ServiceError):
    """The campaign is done."""

    status = 410


class Unprocessable(ServiceError):
    """Well-formed, but not for this campaign (a point outside its box, of another dimension)."""

    status = 422


@contextlib.contextmanager
def as_422():
    """A value that a check of the shared vocabulary refuses (``ValueError``: a point that does
    not fit the inputs, a label that does not fit the outputs), answered 422 with its words."""
    try:
        yield
    except ValueError as error:
        raise Unprocessable(str(error)) from None


class JobFailed(ServiceError):
    """A model job failed on the worker."""

    status = 500


class TooMany(ServiceError):
    """A campaign has as many model calls running as it may (``limit_model_calls``)."""

    status = 429

    def __init__(self, detail: str, retry_after: int):
        super().__init__(detail, {"Retry-After": str(retry_after)})


class Busy(ServiceError):
    """No worker took a model job in time: nothing is wrong with the request; ask again."""

    status = 503

    def __init__(self, detail: str, retry_after: int):
        super().__init__(detail, {"Retry-After": str(retry_after)})


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
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(RedisError, store_unreachable)
    app.add_exception_handler(Exception, _server_error)
