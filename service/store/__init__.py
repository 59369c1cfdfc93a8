"""The campaign store: one module per noun (its Redis keys in :mod:`service.keys`, its Lua
scripts beside the module that runs each, :mod:`service.store.scripts`), composed into the one
object the routes and the jobs use, :class:`CampaignStore`."""

from __future__ import annotations

from redis import Redis

from fbgp_al.service import keys
from fbgp_al.service.store import scripts
from fbgp_al.service.store.campaigns import Campaigns
from fbgp_al.service.store.counters import Counters
from fbgp_al.service.store.history import History
from fbgp_al.service.store.jobs import Jobs
from fbgp_al.service.store.labels import Labels
from fbgp_al.service.store.models import Models
from fbgp_al.service.store.plots import Plots
from fbgp_al.service.store.refits import Refits
from fbgp_al.service.store.revivals import Revivals
from fbgp_al.service.store.runs import Runs
from fbgp_al.service.store.teams import TeamFull, TeamGone, Teams
from fbgp_al.service.store.tickets import Tickets

__all__ = ["CampaignStore", "TeamFull", "TeamGone"]


class CampaignStore(
    Campaigns,
    Teams,
    Labels,
    Runs,
    Tickets,
    Models,
    Refits,
    Revivals,
    Jobs,
    History,
    Plots,
    Counters,
):
    """Every noun of the store on one Redis client. Cheap to build: the scripts are registered
    once per client (:func:`service.store.scripts.on`)."""

    def __init__(self, redis: Redis):
        self.r = redis
        self.s = scripts.on(redis)

    k = staticmethod(keys.campaign)
    team_key = staticmethod(keys.team)
