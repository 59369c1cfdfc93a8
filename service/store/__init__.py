"""The campaign store: one module per noun (its Redis keys in :mod:`service.keys`, its Lua
scripts beside the module that runs each, :mod:`service.store.scripts`), composed into the one
object the routes and the jobs use, :class:`CampaignStore`."""

from __future__ import annotations

from redis import Redis

from service import keys
from service.store import scripts
from service.store.campaigns import Campaigns
from service.store.counters import Counters
from service.store.history import History
from service.store.jobs import Jobs
from service.store.labels import Labels
from service.store.models import Models
from service.store.plots import Plots
from service.store.refits import Refits
from service.store.runs import Runs
from service.store.teams import TeamFull, TeamGone, Teams
from service.store.tickets import Tickets

__all__ = ["CampaignStore", "TeamFull", "TeamGone"]


class CampaignStore(Campaigns, Teams, Labels, Runs, Tickets, Models, Refits, Jobs, History, Plots,
                    Counters):  # fmt: skip
    """Every noun of the store on one Redis client. Cheap to build: the scripts are registered
    once per client (:func:`service.store.scripts.on`)."""

    def __init__(self, redis: Redis):
        self.r = redis
        self.s = scripts.on(redis)

    k = staticmethod(keys.campaign)
    team_key = staticmethod(keys.team)
