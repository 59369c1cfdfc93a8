"""Teams of the stack: ``POST /teams``'s body, a team as listed, and its token."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from fbgp_al.service.schemas.fields import Body, Strict

TEAM_NAME = r"^[a-z0-9][a-z0-9_.-]{0,63}$"


class TeamCreate(Strict):
    """``POST /teams``: a team of the stack, by name."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"name": "physics"}]})

    name: str = Field(
        pattern=TEAM_NAME,
        description="lower-case letters, digits, '_', '.' "
        "and '-', starting with a letter or digit; at most 64",
    )


class Team(Body):
    """A team: its name, when it was made, whether its token is live (a deleted team that
    still holds campaigns is listed, not live), how many campaigns its token created, and its
    tenant: teams of different tenants take turns on the workers."""

    name: str
    """The team's name."""
    created_at: float
    """When it was made, unix seconds."""
    live: bool
    """Whether its token works (a deleted team that holds campaigns stays listed, not live)."""
    n_campaigns: int
    """Campaigns it holds."""
    tenant: int  # the queue of each lane its campaigns' refits wait in (service/queues.py)
    """Its tenant: which refit queue of each lane its campaigns' refits wait in."""


class TeamToken(Body):
    """A team's token, shown once: it creates and lists campaigns, and opens those it created
    (as their owner token does); nothing else."""

    name: str
    """The team's name."""
    token: str
    """Its token, shown once (only its SHA-256 is kept)."""
