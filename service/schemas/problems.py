"""An error's body, ``application/problem+json`` (RFC 9457), and the OpenAPI ``responses`` that
name it for a route's error codes."""

from __future__ import annotations

from http import HTTPStatus

from fbgp_al.service.schemas.fields import Body


class Problem(Body):
    """An error, as ``application/problem+json`` (RFC 9457)."""

    type: str = "about:blank"
    """A URI naming the kind of error (`about:blank`)."""
    title: str
    """The status code's phrase."""
    status: int
    """The HTTP status code."""
    detail: str
    """What went wrong, for people."""
    errors: list[dict] | None = None
    """For a validation error: each invalid field, with its location and message."""


# what a 503 says, and its Retry-After, on every route that declares it
UNAVAILABLE = (
    "Service Unavailable: Redis is out of reach, loading its data after a restart, or refusing "
    "writes (its memory or disk full), or no worker took a model job in time: ask again after "
    "`Retry-After` seconds (a label sent again with its ticket, or an import with its "
    "`Idempotency-Key`, is stored once)."
)
RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before asking again.",
        "schema": {"type": "integer"},
    }
}


def problem_responses(*codes: int) -> dict:
    """OpenAPI ``responses`` for these error codes, each a :class:`Problem`; a 503's says why
    and carries ``Retry-After``."""
    schema = Problem.model_json_schema()
    content = {"application/problem+json": {"schema": schema}}
    responses = {
        code: {"description": HTTPStatus(code).phrase, "content": content} for code in codes
    }
    if 503 in responses:
        responses[503] = {"description": UNAVAILABLE, "content": content, "headers": RETRY_AFTER}
    return responses
