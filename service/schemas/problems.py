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


def problem_responses(*codes: int) -> dict:
    """OpenAPI ``responses`` for these error codes, each a :class:`Problem`."""
    schema = Problem.model_json_schema()
    return {
        code: {
            "description": HTTPStatus(code).phrase,
            "content": {"application/problem+json": {"schema": schema}},
        }
        for code in codes
    }
