"""What every noun of the store holds: the Redis client it reads and writes through, the Lua
scripts registered on that client (:mod:`service.store.scripts`), and the key schema
(:mod:`service.keys`). A noun that needs another declares it as an annotated attribute of its
class (``campaigns: Campaigns``) and is given it when :class:`service.store.CampaignStore`
composes them."""

from __future__ import annotations

from redis import Redis

from fbgp_al.service import keys
from fbgp_al.service.store.scripts import Scripts


class Noun:
    """One noun of the store: ``r``, its Redis client; ``s``, the scripts on it; ``k``, a
    campaign's key (:func:`service.keys.campaign`); and the nouns it needs, ``given`` by name,
    exactly those its class declares (a TypeError otherwise)."""

    k = staticmethod(keys.campaign)
    team_key = staticmethod(keys.team)

    def __init__(self, redis: Redis, scripts: Scripts, **given: Noun):
        needed = type(self).__dict__.get("__annotations__", {})
        if given.keys() != needed.keys():
            raise TypeError(f"{type(self).__name__} needs {sorted(needed)}; given {sorted(given)}")
        self.r = redis
        self.s = scripts
        self.__dict__.update(given)
