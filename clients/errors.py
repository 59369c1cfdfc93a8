"""The SDK's errors: :class:`ApiError`, any non-2xx answer of the service, and
:class:`RefitFailed`, a model that will not come (:func:`check_refit` tells from a campaign's
status)."""

from __future__ import annotations

from typing import Any

from fbgp_al.clients.responses import CampaignStatus


class ApiError(Exception):
    """A non-2xx answer: ``status_code`` and the server's ``detail`` (its message)."""

    def __init__(self, status_code: int, detail: str, body: Any = None):
        super().__init__(f"HTTP {status_code}: {detail}")
        self.status_code = status_code
        self.detail = detail
        self.body = body


class RefitFailed(RuntimeError):
    """The campaign's refit failed and none is running: the model wanted will not come."""


def check_refit(status: CampaignStatus, version: int) -> None:
    """Raise :class:`RefitFailed` if ``status`` shows that model ``version`` will not come: the
    last refit failed and no refit is queued or running."""
    stuck = status.model_version is None or status.model_version < version
    if stuck and status.last_error and status.refit == "idle":
        raise RefitFailed(f"campaign {status.id}: refit failed: {status.last_error}")
