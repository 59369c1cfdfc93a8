"""Request and response bodies of the HTTP API (:mod:`service.schemas.campaigns`)."""

from service.schemas.campaigns import *  # noqa: F403
