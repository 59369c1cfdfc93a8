"""The campaign store: one module per noun (its Redis keys in :mod:`service.keys`, its Lua
scripts beside the module that runs each, :mod:`service.store.scripts`), composed into the one
object the routes and the jobs use, :class:`CampaignStore`: each noun one of its attributes
(``store.labels``, ``store.refits``, ...), given the nouns it needs when it is built."""

from __future__ import annotations

from redis import Redis

from fbgp_al.service.store import scripts
from fbgp_al.service.store.campaigns import Campaigns
from fbgp_al.service.store.census import Census
from fbgp_al.service.store.counters import Counters
from fbgp_al.service.store.groups import Groups
from fbgp_al.service.store.history import History
from fbgp_al.service.store.jobs import Jobs
from fbgp_al.service.store.labels import Labels
from fbgp_al.service.store.models import Models
from fbgp_al.service.store.plots import Plots
from fbgp_al.service.store.pollers import Pollers
from fbgp_al.service.store.refits import Refits
from fbgp_al.service.store.revivals import Revivals
from fbgp_al.service.store.runs import Runs
from fbgp_al.service.store.teams import TeamFull, TeamGone, Teams
from fbgp_al.service.store.tickets import Tickets

__all__ = ["CampaignStore", "TeamFull", "TeamGone"]


class CampaignStore:
    """Every noun of the store on one Redis client, each given the nouns it needs. Cheap to
    build: the scripts are registered once per client (:func:`service.store.scripts.on`)."""

    def __init__(self, redis: Redis):
        self.r = redis
        self.s = s = scripts.on(redis)
        self.pollers = Pollers(redis, s)
        self.counters = Counters(redis, s)
        self.teams = Teams(redis, s)
        self.plots = Plots(redis, s)
        self.groups = Groups(redis, s)
        self.campaigns = Campaigns(redis, s, teams=self.teams, pollers=self.pollers)
        self.tickets = Tickets(redis, s, pollers=self.pollers)
        self.census = Census(redis, s, campaigns=self.campaigns, tickets=self.tickets)
        self.jobs = Jobs(redis, s, campaigns=self.campaigns)
        counted = {"pollers": self.pollers, "counters": self.counters}
        self.runs = Runs(redis, s, campaigns=self.campaigns, **counted)
        self.labels = Labels(redis, s, campaigns=self.campaigns, **counted)
        self.history = History(redis, s, campaigns=self.campaigns, runs=self.runs)
        self.models = Models(
            redis,
            s,
            campaigns=self.campaigns,
            jobs=self.jobs,
            tickets=self.tickets,
            runs=self.runs,
            history=self.history,
            **counted,
        )
        self.refits = Refits(
            redis,
            s,
            campaigns=self.campaigns,
            tickets=self.tickets,
            jobs=self.jobs,
            models=self.models,
            pollers=self.pollers,
        )
        self.revivals = Revivals(
            redis,
            s,
            campaigns=self.campaigns,
            tickets=self.tickets,
            refits=self.refits,
            pollers=self.pollers,
        )
