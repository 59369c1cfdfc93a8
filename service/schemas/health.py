"""The answers of the health checks: ``/healthz`` and ``/livez`` (the process runs) and
``/readyz`` (it can serve campaigns)."""

from __future__ import annotations

from typing import Literal

from fbgp_al.service.schemas.fields import Body


class Health(Body):
    """The process runs."""

    status: Literal["ok"]
    """`ok`."""


class Readiness(Body):
    """Whether the service can serve campaigns, and whether it nears a limit."""

    ready: bool
    """Redis reachable and taking writes, and a worker registered."""
    status: Literal["ready", "degraded", "unavailable"]
    """`ready`; `degraded`: ready, but Redis's memory or its data directory's disk is nearly
    full (`FBGP_REDIS_MEMORY_MAX_FRACTION`, `FBGP_DISK_FREE_MIN_BYTES`), or Redis may evict
    keys: act before Redis refuses the writes labels need; `unavailable`: not ready (503)."""
    workers: int | None = None
    """Workers registered."""
    detail: str | None = None
    """What is missing when not ready; what nears its limit when degraded."""
