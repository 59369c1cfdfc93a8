"""The store's Lua scripts: each in a ``.lua`` file beside the module that runs it, registered
once per Redis client (as RQ registers its own), not once per :class:`~service.store.
CampaignStore`, which the routes and the jobs build for every request and job.

A script's line ``-- needs: a b`` puts the shared fragments ``a.lua`` and ``b.lua`` (and what
they need) before it; a fragment defines Lua functions only.
"""

from __future__ import annotations

import functools
import pathlib
import re
import threading
import weakref

from redis import Redis

HERE = pathlib.Path(__file__).parent
NEEDS = re.compile(r"^-- needs: (.+)$", re.MULTILINE)
# the scripts the store runs (each a file NAME.lua here); the other .lua files are fragments
NAMES = (
    "abandon",
    "add_evaluation",
    "admit_short",
    "adopt",
    "beat",
    "claim",
    "count_created",
    "delete",
    "delete_team",
    "end_refit",
    "enqueue",
    "expire",
    "fail_refit",
    "fail_run",
    "import_observations",
    "issue",
    "label",
    "note_merge",
    "rebuild_phases",
    "renew",
    "replay",
    "resume",
    "retry",
    "retry_due",
    "revive",
    "save_model",
    "stop_at_cost",
    "team_token",
    "track",
    "write_if_campaign",
)


@functools.cache
def source(name: str) -> str:
    """The Lua text of script or fragment ``name``, the fragments it needs first, each once."""
    text = (HERE / f"{name}.lua").read_text()
    out: list[str] = []
    for needs in NEEDS.findall(text):
        for fragment in needs.split():
            part = source(fragment)
            if part not in out:
                out.append(part)
    return "".join(out) + text


class Scripts:
    """The store's scripts registered on one Redis client: ``scripts.label(keys=..., args=...)``
    (a ``redis.commands.core.Script``, which loads itself on the server at first use)."""

    def __init__(self, redis: Redis):
        for name in NAMES:
            setattr(self, name, redis.register_script(source(name)))


_registered: weakref.WeakKeyDictionary[Redis, Scripts] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def on(redis: Redis) -> Scripts:
    """The scripts registered on ``redis``, registered on its first call."""
    with _lock:
        scripts = _registered.get(redis)
        if scripts is None:
            scripts = _registered[redis] = Scripts(redis)
        return scripts
