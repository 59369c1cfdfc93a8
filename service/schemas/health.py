"""The answers of the health checks: ``/healthz`` and ``/livez`` (the process runs) and
``/readyz`` (it can serve campaigns)."""

from __future__ import annotations

from typing import Literal

from service.schemas.fields import Body


class Health(Body):
    """The process runs."""

    status: Literal["ok"]
    """`ok`."""


class Readiness(Body):
    """Whether the service can serve campaigns."""

    ready: bool
    """Redis reachable and a worker registered."""
    workers: int | None = None
    """Workers registered."""
    detail: str | None = None
    """What is missing, when not ready."""
