"""The campaign store: the one module that knows the Redis keys.

Per campaign ``{id}`` (prefix ``fbgp:c:{id}:``):

- ``spec``: the campaign's JSON body, as created (with ``id``, ``created_at``, the initial
  design's pool indices), but for an explicit pool's points, of which it keeps the count
  (:func:`service.pool.stored_pool`): they are in ``points``, raw little-endian float64, row
  after row, in original units, so that ``/next`` reads one row and no call parses them all;
- ``state`` (hash): ``refit`` (``idle`` | ``queued`` | ``running``), ``refit_job`` (the id of
  the refit job in charge: the token that fences off every other refit's writes), ``queued_at``,
  ``started_at``, ``heartbeat`` (refreshed while the refit runs), ``model_version``,
  ``last_error``, ``last_refit_seconds``, ``changes`` (runs failed or abandoned so far),
  ``changes_seen`` (``changes`` when the refit in charge started: a refit that ends with more
  runs one more, so that its ranking leaves out points failed since), ``n_abandoned``;
- ``labels`` (list, append-only): one JSON record per label ``{x, y, index, ticket}``; its length
  is the number of labels;
- ``labeled`` (set): pool indices that have a label;
- ``tickets`` (hash): ticket -> JSON ``{x, index, issued_at, expires_at, model_version}``,
  written once (``expires_at`` as issued; a renewal moves only the lease); ``ticket_state``
  (hash): ticket -> ``pending``, ``labeled:<y>``, ``failed:<reason>`` or ``abandoned``;
- ``leases`` (sorted set): tickets out now, by expiry; an expired one leaves the set (its point
  is offered again) but may still be labeled while its point has no label; a failed or
  abandoned one leaves it at once;
- ``failures`` (list, append-only): one JSON record per failed run
  ``{x, index, ticket, reason, at}``; its length is the number of failures. The refit never
  reads it: a failed run is no label. ``failed`` (hash): pool index -> its failed runs (more
  than ``max_retries``: not offered again);
- ``model`` (string): the latest model's JSON; ``ranking`` (string): the pool points it ranks
  best, best first; ``history`` (list): one JSON line per model version stored (version, time,
  refit seconds, R-hat, ESS, divergences), refit failed, run failed (``run_failed``: ticket, x,
  reason) or run abandoned (``run_abandoned``).

- ``token``: the SHA-256 of the campaign's access token (the token itself is not stored).

``fbgp:campaigns`` (set) holds every campaign id; ``fbgp:tokens`` (hash) maps each campaign
token's SHA-256 to the campaign; ``fbgp:metrics:campaigns`` (hash) counts the campaigns in each
phase (``design``, ``active``, ``done``). A label is acknowledged only after the Lua
script that checks its ticket and appends it has run, so a label is stored exactly once.

The rules these scripts apply atomically are :mod:`service.loop`'s (``label_outcome``,
``fail_outcome``, ``abandon_outcome``, ``renew_outcome``, ``exhausts``, ``import_outcome``,
``refit_due``, ``refit_again``); the scripts return the outcomes' values.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import json
import logging
import time
import uuid

import numpy as np
from redis import Redis
from redis.exceptions import RedisError

from service import loop, queues
from service import pool as pools
from service.errors import NotFound
from service.loop import (
    ImportOutcome,
    LabelOutcome,
    Refit,
    RenewOutcome,
    Rules,
    RunOutcome,
    Snapshot,
)
from service.observability import record_labels, record_runs
from service.tokens import new_token, token_digest
from worker.design import initial_design

PREFIX = "fbgp:"
# the pub/sub channel on which a campaign's id is published whenever something changes what its
# /next may answer (a label, an import, a failed or abandoned run, a model, a refit's end)
WAKE_CHANNEL = PREFIX + "wake"
log = logging.getLogger("fbgp.store")
MAX_REASON = 2000  # characters of a failure's reason kept
RESERVE_SIZE = 32  # pool points set aside to stand in for design points that fail, at most
CAMPAIGNS = PREFIX + "campaigns"
TOKENS = PREFIX + "tokens"
PHASES = PREFIX + "metrics:campaigns"  # hash: design, active, done -> campaigns in that phase
# every key of a campaign (``fbgp:c:{id}:{part}``), as the module's docstring lists them
PARTS = ("spec", "points", "state", "labels", "labeled", "tickets", "ticket_state", "leases",
         "failures", "failed", "model", "ranking", "history", "token")  # fmt: skip
ROW_TYPE = np.dtype("<f8")  # an explicit pool's stored coordinates

# Shared by the scripts that add labels (loop.refit_due): once the design is labeled, mark a refit
# queued (1: the caller enqueues it). If one is queued or running already, nothing: when it ends it
# sees whether labels arrived after it read them, and runs once more if so (END_REFIT_SCRIPT).
REQUEST_REFIT = """
local function request_refit(state_key, n, design_size, now)
  if n < tonumber(design_size) then return 0 end
  if redis.call('HGET', state_key, 'refit') == 'idle' then
    redis.call('HSET', state_key, 'refit', 'queued', 'queued_at', now)
    return 1
  end
  return 0
end
"""

# Shared by the scripts that create and delete campaigns or add labels: the count of campaigns by
# phase (loop.phase) in PHASES, kept as labels move a campaign on, so that /metrics reads three
# numbers instead of every campaign's status. PHASES is exact whenever it exists: it is made by
# REBUILD_PHASES (one atomic count of every campaign), and nothing adds to it while it is absent.
COUNT_PHASES = """
local function phase(n, design_size, max_labels)
  if n >= tonumber(max_labels) then return 'done' end
  if n < tonumber(design_size) then return 'design' end
  return 'active'
end
local function add_phase(phases_key, name, count)
  if redis.call('EXISTS', phases_key) == 1 then redis.call('HINCRBY', phases_key, name, count) end
end
local function move_phase(phases_key, before, after, design_size, max_labels)
  local from, to = phase(before, design_size, max_labels), phase(after, design_size, max_labels)
  if from ~= to then
    add_phase(phases_key, from, -1)
    add_phase(phases_key, to, 1)
  end
end
"""

# Counts every campaign by phase into PHASES (KEYS[1]) from the index (KEYS[2]), each campaign's
# spec and labels read under the prefix ARGV[1], in one step; returns nothing.
REBUILD_PHASES = (
    COUNT_PHASES
    + """
local counts = {design = 0, active = 0, done = 0}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  local raw = redis.call('GET', ARGV[1] .. id .. ':spec')
  if raw then
    local spec = cjson.decode(raw)
    local n = redis.call('LLEN', ARGV[1] .. id .. ':labels')
    local name = phase(n, spec['initial_design']['size'], spec['max_labels'])
    counts[name] = counts[name] + 1
  end
end
redis.call('HSET', KEYS[1], 'design', counts.design, 'active', counts.active, 'done', counts.done)
"""
)

# Counts a new campaign (KEYS[1]: PHASES) in its phase ARGV[1].
COUNT_CREATED = COUNT_PHASES + "add_phase(KEYS[1], ARGV[1], 1)"

# Shared by the scripts that end a ticket (a label, a failure, an abandon): what its state says
# before it ends (nil: it is pending, go on; else the outcome, 'same_again' when it ended the way
# asked already), and its end: its state set and its lease gone.
END_TICKET = """
local function ended(ticket_state_key, ticket, wanted)
  local state = redis.call('HGET', ticket_state_key, ticket)
  if not state then return 'unknown_ticket' end
  if state == 'pending' then return nil end
  if state == wanted then return 'same_again' end
  return 'conflict'
end
local function end_ticket(ticket_state_key, leases_key, ticket, new_state)
  redis.call('HSET', ticket_state_key, ticket, new_state)
  redis.call('ZREM', leases_key, ticket)
end
"""

# Checks and records a label for a ticket, atomically (loop.label_outcome). Returns
# {outcome, n_labeled, enqueue_refit}, the outcome a loop.LabelOutcome value.
LABEL_SCRIPT = (
    REQUEST_REFIT
    + COUNT_PHASES
    + END_TICKET
    + """
local n = redis.call('LLEN', KEYS[4])
local outcome = ended(KEYS[2], ARGV[1], 'labeled:' .. ARGV[2])
if outcome then return {outcome, n, 0} end
if ARGV[4] ~= '' and ARGV[6] == '0' and redis.call('SISMEMBER', KEYS[5], ARGV[4]) == 1 then
  return {'conflict', n, 0}
end
if n >= tonumber(ARGV[5]) then return {'done', n, 0} end
end_ticket(KEYS[2], KEYS[3], ARGV[1], 'labeled:' .. ARGV[2])
redis.call('RPUSH', KEYS[4], ARGV[3])
if ARGV[4] ~= '' then redis.call('SADD', KEYS[5], ARGV[4]) end
move_phase(KEYS[7], n, n + 1, ARGV[7], ARGV[5])
n = n + 1
return {'stored', n, request_refit(KEYS[6], n, ARGV[7], ARGV[8])}
"""
)

# Ends a pending ticket's run as failed (loop.fail_outcome): its lease ends, the failure is
# appended, its point's count of failures goes up, and once the design is labeled a refit is
# requested (loop.refit_due) so that the ranking leaves the point out if it failed for good.
# KEYS: ticket_state, leases, failures, failed, state, history, labels; ARGV: ticket,
# 'failed:<reason>', record, index, design size, now, history event. Returns {outcome,
# n_failed, enqueue_refit}, the outcome a loop.RunOutcome value.
FAIL_RUN_SCRIPT = (
    REQUEST_REFIT
    + END_TICKET
    + """
local failed = redis.call('LLEN', KEYS[3])
local outcome = ended(KEYS[1], ARGV[1], ARGV[2])
if outcome then return {outcome, failed, 0} end
end_ticket(KEYS[1], KEYS[2], ARGV[1], ARGV[2])
redis.call('RPUSH', KEYS[3], ARGV[3])
if ARGV[4] ~= '' then redis.call('HINCRBY', KEYS[4], ARGV[4], 1) end
redis.call('HINCRBY', KEYS[5], 'changes', 1)
redis.call('RPUSH', KEYS[6], ARGV[7])
local n = redis.call('LLEN', KEYS[7])
return {'stored', failed + 1, request_refit(KEYS[5], n, ARGV[5], ARGV[6])}
"""
)

# Abandons a pending ticket (loop.abandon_outcome): its lease ends and its point is free again;
# once the design is labeled a refit is requested (the ranking takes the point back).
# KEYS: ticket_state, leases, state, history, labels; ARGV: ticket, design size, now, history
# event. Returns {outcome, n_abandoned, enqueue_refit}.
ABANDON_SCRIPT = (
    REQUEST_REFIT
    + END_TICKET
    + """
local abandoned = tonumber(redis.call('HGET', KEYS[3], 'n_abandoned') or '0')
local outcome = ended(KEYS[1], ARGV[1], 'abandoned')
if outcome then return {outcome, abandoned, 0} end
end_ticket(KEYS[1], KEYS[2], ARGV[1], 'abandoned')
redis.call('HINCRBY', KEYS[3], 'changes', 1)
abandoned = redis.call('HINCRBY', KEYS[3], 'n_abandoned', 1)
redis.call('RPUSH', KEYS[4], ARGV[4])
local n = redis.call('LLEN', KEYS[5])
return {'stored', abandoned, request_refit(KEYS[3], n, ARGV[2], ARGV[3])}
"""
)

# Extends a live lease to ARGV[3] (loop.renew_outcome). KEYS: ticket_state, leases; ARGV:
# ticket, now, new expiry. Returns {outcome, expires_at}.
RENEW_SCRIPT = """
local state = redis.call('HGET', KEYS[1], ARGV[1])
if not state then return {'unknown_ticket', ''} end
if state ~= 'pending' then return {'ended', ''} end
local expiry = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not expiry or tonumber(expiry) < tonumber(ARGV[2]) then return {'expired', expiry or ''} end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return {'renewed', ARGV[3]}
"""

# Appends imported observations if they fit under max_labels and, without repeats, none is a pool
# point labeled already or twice among them (loop.import_outcome). Returns
# {outcome, n, enqueue}, the outcome a loop.ImportOutcome value.
IMPORT_SCRIPT = (
    REQUEST_REFIT
    + COUNT_PHASES
    + """
local n = redis.call('LLEN', KEYS[1])
local count = tonumber(ARGV[1])
if n + count > tonumber(ARGV[2]) then return {'too_many', n, 0} end
if ARGV[5 + 2 * count] == '0' then
  local seen = {}
  for i = 1, count do
    local index = ARGV[5 + 2 * (i - 1)]
    if index ~= '' then
      if seen[index] or redis.call('SISMEMBER', KEYS[2], index) == 1 then
        return {'repeated', n, 0}
      end
      seen[index] = true
    end
  end
end
for i = 1, count do
  redis.call('RPUSH', KEYS[1], ARGV[4 + 2 * (i - 1)])
  local index = ARGV[5 + 2 * (i - 1)]
  if index ~= '' then redis.call('SADD', KEYS[2], index) end
end
move_phase(KEYS[4], n, n + count, ARGV[3], ARGV[2])
n = n + count
return {'stored', n, request_refit(KEYS[3], n, ARGV[3], ARGV[4 + 2 * count])}
"""
)

# Deletes campaign ARGV[1], all or nothing: its keys (KEYS[6..]), its id from the index, its
# token, and its count in its phase. KEYS: spec, labels, token, the index, the tokens, PHASES,
# then every part; ARGV: id, design size, max_labels. Returns 0 if it was gone already.
DELETE_SCRIPT = (
    COUNT_PHASES
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local n = redis.call('LLEN', KEYS[2])
local digest = redis.call('GET', KEYS[3])
add_phase(KEYS[6], phase(n, ARGV[2], ARGV[3]), -1)
for i = 7, #KEYS do redis.call('UNLINK', KEYS[i]) end
redis.call('SREM', KEYS[4], ARGV[1])
if digest then redis.call('HDEL', KEYS[5], digest) end
return 1
"""
)

# Ends the refit ARGV[3] that saw ARGV[1] labels: 1 if another one must run (more labels came,
# or runs failed or were abandoned since it started: loop.refit_again), else 0 (also when that
# refit is no longer the one in charge).
END_REFIT_SCRIPT = """
if redis.call('HGET', KEYS[1], 'refit_job') ~= ARGV[3] then return 0 end
local n = redis.call('LLEN', KEYS[2])
local changes = redis.call('HGET', KEYS[1], 'changes') or '0'
local seen = redis.call('HGET', KEYS[1], 'changes_seen') or '0'
if n > tonumber(ARGV[1]) or changes ~= seen then
  redis.call('HSET', KEYS[1], 'refit', 'queued', 'queued_at', ARGV[2])
  return 1
end
redis.call('HSET', KEYS[1], 'refit', 'idle')
return 0
"""


# Refreshes the heartbeat of refit ARGV[1] (and marks it running if ARGV[3] is 1), if it is still
# the one in charge; a start notes the failures and abandons it sees. Returns 1 if so.
BEAT_SCRIPT = """
if redis.call('HGET', KEYS[1], 'refit_job') ~= ARGV[1] then return 0 end
if ARGV[3] == '1' then
  local changes = redis.call('HGET', KEYS[1], 'changes') or '0'
  redis.call('HSET', KEYS[1], 'refit', 'running', 'started_at', ARGV[2], 'changes_seen', changes)
end
redis.call('HSET', KEYS[1], 'heartbeat', ARGV[2])
return 1
"""

# Hands the refit over from job ARGV[1] (found dead) to job ARGV[2]; 1 if this call did it.
REVIVE_SCRIPT = """
if redis.call('HGET', KEYS[1], 'refit_job') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'refit', 'queued', 'queued_at', ARGV[3], 'refit_job', ARGV[2])
return 1
"""

# Stores the model of refit ARGV[1] if it is still in charge and the model is not older than
# the stored one: 1 stored, 0 older, -1 not in charge (or the campaign is gone).
SAVE_MODEL_SCRIPT = """
if redis.call('HGET', KEYS[1], 'refit_job') ~= ARGV[1] then return -1 end
local current = redis.call('HGET', KEYS[1], 'model_version')
if current and tonumber(current) > tonumber(ARGV[2]) then return 0 end
redis.call('RPUSH', KEYS[2], ARGV[3])
redis.call('SET', KEYS[3], ARGV[4])
redis.call('SET', KEYS[4], ARGV[5])
redis.call('HSET', KEYS[1], 'model_version', ARGV[2], 'last_error', '',
           'last_refit_seconds', ARGV[6])
return 1
"""

# Records the failure of refit ARGV[1] if it is still in charge. Returns 1 if so.
FAIL_SCRIPT = """
if redis.call('HGET', KEYS[1], 'refit_job') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'last_error', ARGV[2])
redis.call('RPUSH', KEYS[2], ARGV[3])
return 1
"""


def design_reserve(pool, design: list[int], seed: int) -> list[int]:
    """Pool indices, in a seeded random order, that stand in for design points failed for good
    (:func:`service.loop.design_points`): up to ``RESERVE_SIZE``, none of the design's."""
    size = min(RESERVE_SIZE, pool.size - len(design))
    rng = np.random.default_rng([int(seed), 1])
    reserve = pool.subsample(size, rng, exclude=design)
    return [int(i) for i in rng.permutation(reserve)]


class CampaignStore:
    def __init__(self, redis: Redis):
        self.r = redis
        self._label = redis.register_script(LABEL_SCRIPT)
        self._import = redis.register_script(IMPORT_SCRIPT)
        self._end_refit = redis.register_script(END_REFIT_SCRIPT)
        self._beat = redis.register_script(BEAT_SCRIPT)
        self._revive = redis.register_script(REVIVE_SCRIPT)
        self._save_model = redis.register_script(SAVE_MODEL_SCRIPT)
        self._fail = redis.register_script(FAIL_SCRIPT)
        self._fail_run = redis.register_script(FAIL_RUN_SCRIPT)
        self._abandon = redis.register_script(ABANDON_SCRIPT)
        self._renew = redis.register_script(RENEW_SCRIPT)
        self._delete = redis.register_script(DELETE_SCRIPT)
        self._count_created = redis.register_script(COUNT_CREATED)
        self._rebuild_phases = redis.register_script(REBUILD_PHASES)

    @staticmethod
    def k(campaign_id: str, part: str) -> str:
        return f"{PREFIX}c:{campaign_id}:{part}"

    # -- campaigns ---------------------------------------------------------------------------
    def create(self, body: dict) -> dict:
        campaign_id = uuid.uuid4().hex[:16]
        spec = dict(body, id=campaign_id, created_at=time.time())
        pool = pools.pool_of(spec)
        design = initial_design(pool, spec["initial_design"]["size"], spec["seed"])
        spec["design_index"] = [int(i) for i in design]
        spec["design_reserve"] = design_reserve(pool, spec["design_index"], spec["seed"])
        pipe = self.r.pipeline()
        pipe.set(self.k(campaign_id, "spec"),
                 json.dumps(dict(spec, pool=pools.stored_pool(spec["pool"]))))  # fmt: skip
        if pools.explicit(spec):
            points = np.asarray(spec["pool"]["points"], dtype=ROW_TYPE)
            pipe.set(self.k(campaign_id, "points"), points.tobytes())
        pipe.hset(self.k(campaign_id, "state"), mapping={"refit": "idle"})
        pipe.sadd(CAMPAIGNS, campaign_id)
        self._count_created(keys=[PHASES], args=[str(loop.phase(Rules.of(spec), 0))], client=pipe)
        pipe.execute()
        return spec

    def issue_token(self, campaign_id: str) -> str:
        """A new access token for the campaign, returned once; only its digest is kept."""
        token = new_token()
        digest = token_digest(token)
        pipe = self.r.pipeline()
        pipe.hset(TOKENS, digest, campaign_id)
        pipe.set(self.k(campaign_id, "token"), digest)
        pipe.execute()
        return token

    def token_owner(self, token: str) -> str | None:
        """The campaign whose token this is, if any."""
        owner = self.r.hget(TOKENS, token_digest(token))
        return None if owner is None else owner.decode()

    def ids(self) -> list[str]:
        return sorted(i.decode() for i in self.r.smembers(CAMPAIGNS))

    def ids_page(self, cursor: str | None, limit: int | None) -> tuple[list[str], str | None]:
        """The campaign ids after ``cursor`` (an id; None: from the first), in order, at most
        ``limit`` of them (None: all), and the cursor of the next page (None: this is the last).
        Only the page's campaigns are read further by the callers."""
        ids = self.ids()
        if cursor is not None:
            ids = ids[bisect.bisect_right(ids, cursor) :]
        if limit is None or len(ids) <= limit:
            return ids, None
        return ids[:limit], ids[limit - 1]

    def statuses(self, ids: list[str]) -> list[dict]:
        """The status of each campaign of ``ids`` that still exists (deleted meanwhile: left
        out)."""
        out = []
        for campaign_id in ids:
            with contextlib.suppress(NotFound):
                out.append(self.status(campaign_id))
        return out

    def count_by_phase(self) -> dict[str, int]:
        """How many campaigns are in each phase (:func:`service.loop.phase`), as the scripts
        that add labels keep count; counted once from every campaign (:data:`REBUILD_PHASES`)
        where no count is kept yet (a new store, or one written before the count existed)."""
        if not self.r.exists(PHASES):
            self._rebuild_phases(keys=[PHASES, CAMPAIGNS], args=[f"{PREFIX}c:"])
        counts = {k.decode(): int(v) for k, v in self.r.hgetall(PHASES).items()}
        return {str(p): counts.get(str(p), 0) for p in loop.Phase}

    def spec(self, campaign_id: str) -> dict:
        raw = self.r.get(self.k(campaign_id, "spec"))
        if raw is None:
            raise NotFound(f"no campaign {campaign_id!r}")
        return json.loads(raw)

    def points(self, campaign_id: str, spec: dict) -> np.ndarray | None:
        """An explicit pool's points (``m x d``, original units); None for a grid or a pool
        kept in the spec itself (as campaigns created before the points were kept apart)."""
        if not pools.explicit(spec) or "points" in spec["pool"]:
            return None
        raw = self.r.get(self.k(campaign_id, "points"))
        if raw is None:
            raise NotFound(f"no campaign {campaign_id!r}")
        return np.frombuffer(raw, dtype=ROW_TYPE).reshape(-1, len(spec["inputs"]))

    def pool(self, campaign_id: str, spec: dict):
        """The campaign's pool in the unit cube (:func:`service.pool.pool_of`)."""
        return pools.pool_of(spec, self.points(campaign_id, spec))

    def pool_points(self, campaign_id: str, spec: dict, indices: list[int]) -> list[list[float]]:
        """Pool points ``indices`` in original units: of an explicit pool, their stored rows
        (one ``GETRANGE`` each, in one round trip, whatever the pool's size), exactly as
        posted."""
        if not pools.explicit(spec):
            return [pools.grid_point(spec, i) for i in indices]
        if "points" in spec["pool"]:
            return [[float(v) for v in spec["pool"]["points"][i]] for i in indices]
        width = ROW_TYPE.itemsize * len(spec["inputs"])
        pipe = self.r.pipeline(transaction=False)
        for i in indices:
            pipe.getrange(self.k(campaign_id, "points"), i * width, (i + 1) * width - 1)
        rows = pipe.execute()
        if any(len(raw) != width for raw in rows):
            raise NotFound(f"no campaign {campaign_id!r}")
        return [np.frombuffer(raw, dtype=ROW_TYPE).tolist() for raw in rows]

    def delete(self, campaign_id: str) -> None:
        """All the campaign's keys, its id and its token, at once (:data:`DELETE_SCRIPT`)."""
        spec = self.spec(campaign_id)
        part = functools.partial(self.k, campaign_id)
        keys = [part("spec"), part("labels"), part("token"), CAMPAIGNS, TOKENS, PHASES]
        args = [campaign_id, spec["initial_design"]["size"], spec["max_labels"]]
        if not self._delete(keys=keys + [part(p) for p in PARTS], args=args):
            raise NotFound(f"no campaign {campaign_id!r}")
        self.wake(campaign_id)

    def state(self, campaign_id: str) -> dict:
        raw = self.r.hgetall(self.k(campaign_id, "state"))
        return {k.decode(): v.decode() for k, v in raw.items()}

    def n_labeled(self, campaign_id: str) -> int:
        return int(self.r.llen(self.k(campaign_id, "labels")))

    def status(self, campaign_id: str, now: float | None = None) -> dict:
        spec = self.spec(campaign_id)
        now = time.time() if now is None else now
        rules = Rules.of(spec)
        refit = Refit.of(self.state(campaign_id))
        n = self.n_labeled(campaign_id)
        pending = int(self.r.zcount(self.k(campaign_id, "leases"), now, "+inf"))
        n_failed = int(self.r.llen(self.k(campaign_id, "failures")))
        # only runs that failed can stall a campaign: the whole snapshot is read only then
        stalled = n_failed > 0 and loop.stalled(rules, self.snapshot(campaign_id, now, False))
        return {
            "id": campaign_id, "name": spec["name"], "state": str(loop.phase(rules, n)),
            "n_labeled": n, "n_pending": pending, "max_labels": spec["max_labels"],
            "model_version": refit.model_version, "last_error": refit.last_error,
            "refit": str(refit.phase), "acquisition": spec["acquisition"], "mode": spec["mode"],
            "inputs": spec["inputs"], "n_failed": n_failed, "n_abandoned": refit.n_abandoned,
            "max_failures": rules.failure_limit, "failing": loop.failing(rules, n_failed),
            "stalled": stalled,
        }  # fmt: skip

    # -- labels ------------------------------------------------------------------------------
    def labels(self, campaign_id: str) -> list[dict]:
        return [json.loads(v) for v in self.r.lrange(self.k(campaign_id, "labels"), 0, -1)]

    def record_label(
        self, campaign_id: str, ticket: str, y: float, now: float
    ) -> tuple[LabelOutcome, int, bool]:
        """Store the label of ``ticket`` (:func:`service.loop.label_outcome`, atomically):
        ``(outcome, n_labeled, enqueue_refit)``."""
        spec = self.spec(campaign_id)
        raw = self.r.hget(self.k(campaign_id, "tickets"), ticket)
        if raw is None:
            return LabelOutcome.UNKNOWN_TICKET, self.n_labeled(campaign_id), False
        info = json.loads(raw)
        record = json.dumps({"x": info["x"], "y": y, "index": info["index"], "ticket": ticket})
        index = "" if info["index"] is None else str(info["index"])
        keys = [self.k(campaign_id, p) for p in
                ("tickets", "ticket_state", "leases", "labels", "labeled", "state")]  # fmt: skip
        keys.append(PHASES)
        repeats = "1" if spec["allow_repeats"] else "0"
        args = [ticket, repr(float(y)), record, index, spec["max_labels"], repeats,
                spec["initial_design"]["size"], now]  # fmt: skip
        outcome, n, enqueue = self._label(keys=keys, args=args)
        self.wake(campaign_id)
        return LabelOutcome(outcome.decode()), int(n), bool(enqueue)

    def import_observations(
        self, campaign_id: str, x: list, y: list, now: float
    ) -> tuple[ImportOutcome, int, bool]:
        """Store imported observations, all or none (:func:`service.loop.import_outcome`):
        ``(outcome, n_labeled, enqueue_refit)``."""
        spec = self.spec(campaign_id)
        index = pools.pool_index_of(spec, self.pool(campaign_id, spec), x)
        args: list = [len(x), spec["max_labels"], spec["initial_design"]["size"]]
        for xi, yi, ii in zip(x, y, index, strict=True):
            args += [json.dumps({"x": xi, "y": yi, "index": ii, "ticket": None}),
                     "" if ii is None else str(ii)]  # fmt: skip
        args += [now, "1" if spec["allow_repeats"] else "0"]
        keys = [self.k(campaign_id, p) for p in ("labels", "labeled", "state")] + [PHASES]
        outcome, n, enqueue = self._import(keys=keys, args=args)
        self.wake(campaign_id)
        return ImportOutcome(outcome.decode()), int(n), bool(enqueue)

    def count_labels(self, count: int) -> None:
        """Add stored labels to the shared metric."""
        record_labels(self.r, count)

    # -- failed, abandoned and renewed runs -----------------------------------------------------
    def failures(self, campaign_id: str) -> list[dict]:
        return [json.loads(v) for v in self.r.lrange(self.k(campaign_id, "failures"), 0, -1)]

    def _ticket(self, campaign_id: str, ticket: str) -> dict | None:
        raw = self.r.hget(self.k(campaign_id, "tickets"), ticket)
        return None if raw is None else json.loads(raw)

    def fail_run(
        self, campaign_id: str, ticket: str, reason: str, now: float
    ) -> tuple[RunOutcome, int, bool]:
        """Record that ``ticket``'s run failed (:func:`service.loop.fail_outcome`, atomically):
        ``(outcome, n_failed, enqueue_refit)``."""
        spec = self.spec(campaign_id)
        info = self._ticket(campaign_id, ticket)
        if info is None:
            return (
                RunOutcome.UNKNOWN_TICKET,
                int(self.r.llen(self.k(campaign_id, "failures"))),
                False,
            )
        reason = reason[:MAX_REASON]
        record = {"x": info["x"], "index": info["index"], "ticket": ticket, "reason": reason,
                  "at": now}  # fmt: skip
        event = dict(record, event="run_failed")
        keys = [self.k(campaign_id, p) for p in ("ticket_state", "leases", "failures", "failed",
                                                 "state", "history", "labels")]  # fmt: skip
        index = "" if info["index"] is None else str(info["index"])
        args = [ticket, f"failed:{reason}", json.dumps(record), index,
                spec["initial_design"]["size"], now, json.dumps(event)]  # fmt: skip
        outcome, n, enqueue = self._fail_run(keys=keys, args=args)
        self.wake(campaign_id)
        return RunOutcome(outcome.decode()), int(n), bool(enqueue)

    def abandon(self, campaign_id: str, ticket: str, now: float) -> tuple[RunOutcome, int, bool]:
        """Abandon ``ticket`` (:func:`service.loop.abandon_outcome`, atomically): its point is
        free again. ``(outcome, n_abandoned, enqueue_refit)``."""
        spec = self.spec(campaign_id)
        info = self._ticket(campaign_id, ticket)
        event = {"event": "run_abandoned", "ticket": ticket, "at": now,
                 "x": None if info is None else info["x"]}  # fmt: skip
        keys = [self.k(campaign_id, p) for p in
                ("ticket_state", "leases", "state", "history", "labels")]  # fmt: skip
        args = [ticket, spec["initial_design"]["size"], now, json.dumps(event)]
        outcome, n, enqueue = self._abandon(keys=keys, args=args)
        self.wake(campaign_id)
        return RunOutcome(outcome.decode()), int(n), bool(enqueue)

    def renew(self, campaign_id: str, ticket: str, now: float) -> tuple[RenewOutcome, float | None]:
        """Extend ``ticket``'s live lease by ``lease_seconds`` from now
        (:func:`service.loop.renew_outcome`): ``(outcome, expires_at)``."""
        spec = self.spec(campaign_id)
        keys = [self.k(campaign_id, "ticket_state"), self.k(campaign_id, "leases")]
        outcome, expiry = self._renew(keys=keys, args=[ticket, now, now + spec["lease_seconds"]])
        return RenewOutcome(outcome.decode()), float(expiry) if expiry else None

    def count_runs(self, kind: str) -> None:
        """Add a failed or abandoned run to the shared metric."""
        record_runs(self.r, kind)

    # -- tickets -----------------------------------------------------------------------------
    def issue(self, campaign_id: str, offers: list[tuple[int | None, list[float], int | None]],
              lease: float, now: float) -> list[dict]:  # fmt: skip
        """A ticket for each ``(index, x, model_version)``, leased for ``lease`` seconds, in
        one round trip; the tickets as ``/next`` answers them."""
        pipe = self.r.pipeline()
        out = []
        for index, x, version in offers:
            ticket = uuid.uuid4().hex
            info = {"x": x, "index": index, "issued_at": now, "expires_at": now + lease,
                    "model_version": version}  # fmt: skip
            pipe.hset(self.k(campaign_id, "tickets"), ticket, json.dumps(info))
            pipe.hset(self.k(campaign_id, "ticket_state"), ticket, "pending")
            pipe.zadd(self.k(campaign_id, "leases"), {ticket: now + lease})
            out.append({"ticket": ticket, "x": x, "expires_at": now + lease,
                        "model_version": version})  # fmt: skip
        pipe.execute()
        return out

    def withdraw(self, campaign_id: str, tickets: list[str]) -> None:
        """Take back tickets that no simulator received (their poll ended before it could be
        answered): gone as if never issued, their points free again at once."""
        pipe = self.r.pipeline()
        for part in ("tickets", "ticket_state"):
            pipe.hdel(self.k(campaign_id, part), *tickets)
        pipe.zrem(self.k(campaign_id, "leases"), *tickets)
        pipe.execute()
        self.wake(campaign_id)

    def snapshot(self, campaign_id: str, now: float, expire: bool = True) -> Snapshot:
        """The labels, the tickets out, the refit state, the latest ranking and the failed
        points as of one instant (one MULTI/EXEC; expired leases are dropped first, or with
        ``expire=False`` only left out), for :func:`service.loop.next_answer`. Read one at a
        time, a label stored in between would count neither as labeled nor as out, and one
        ticket too many could be handed out."""
        leases = self.k(campaign_id, "leases")
        pipe = self.r.pipeline(transaction=True)
        if expire:
            pipe.zremrangebyscore(leases, "-inf", f"({now}")
        pipe.zrangebyscore(leases, now, "+inf")
        pipe.llen(self.k(campaign_id, "labels"))
        pipe.smembers(self.k(campaign_id, "labeled"))
        pipe.hgetall(self.k(campaign_id, "state"))
        pipe.get(self.k(campaign_id, "ranking"))
        pipe.hgetall(self.k(campaign_id, "failed"))
        *_, tickets, n, labeled, state, ranking, failed = pipe.execute()
        infos = self.r.hmget(self.k(campaign_id, "tickets"), tickets) if tickets else []
        return Snapshot(
            n_labeled=int(n),
            n_pending=len(tickets),
            pending=frozenset(json.loads(i)["index"] for i in infos if i is not None) - {None},
            labeled=frozenset(int(i) for i in labeled),
            refit=Refit.of({k.decode(): v.decode() for k, v in state.items()}),
            ranking=tuple(p["index"] for p in json.loads(ranking)) if ranking else (),
            failures={int(i): int(c) for i, c in failed.items()},
        )

    def wake(self, campaign_id: str) -> None:
        """Tell the API processes' long polls of the campaign's ``/next`` that its answer may
        have changed (:data:`WAKE_CHANNEL`). A message lost (Redis away for a moment) costs a
        poll at most its fallback interval, so a failure here is logged, never raised: what
        was stored stays stored."""
        try:
            self.r.publish(WAKE_CHANNEL, campaign_id)
        except RedisError as error:
            log.warning("wake-up of campaign %s not published: %s", campaign_id, error)

    def lock(self, campaign_id: str, timeout: float = 10.0):
        """Serializes the choice of points for one campaign across API processes: held at
        most ``timeout`` seconds, waited for at most as long."""
        return self.r.lock(self.k(campaign_id, "lock"), timeout=timeout, blocking_timeout=timeout)

    # -- models and refits -------------------------------------------------------------------
    def save_model(self, campaign_id: str, model: dict, ranking: list[dict], token: str) -> bool:
        """Store the model of refit ``token`` unless another refit is in charge now or a newer
        model is there already; True if stored."""
        d = model["diagnostics"]
        event = {"event": "model", "version": model["version"], "at": time.time()}
        for key in ("refit_seconds", "max_rhat", "min_ess_bulk", "divergences", "started_at"):
            event[key] = d.get(key)
        keys = [self.k(campaign_id, p) for p in ("state", "history", "model", "ranking")]
        args = [token, model["version"], json.dumps(event), json.dumps(model), json.dumps(ranking),
                d.get("refit_seconds", 0.0)]  # fmt: skip
        stored = self._save_model(keys=keys, args=args) == 1
        if stored:
            self.wake(campaign_id)
        return stored

    def model(self, campaign_id: str) -> dict:
        raw = self.r.get(self.k(campaign_id, "model"))
        if raw is None:
            self.spec(campaign_id)
            raise NotFound(f"campaign {campaign_id!r} has no model yet")
        return json.loads(raw)

    def ranking(self, campaign_id: str) -> list[dict]:
        raw = self.r.get(self.k(campaign_id, "ranking"))
        return [] if raw is None else json.loads(raw)

    def enqueue_refit(self, campaign_id: str) -> str:
        """Put a refit on the queue and put it in charge (the state says ``queued`` already).
        Its job id is written first, so the job finds itself in charge when it starts."""
        job_id = uuid.uuid4().hex
        self.r.hset(self.k(campaign_id, "state"), "refit_job", job_id)
        queues.enqueue_refit(self.r, campaign_id, job_id)
        return job_id

    def revive_refit(self, campaign_id: str, now: float, lease: float) -> bool:
        """Enqueue the campaign's refit again if it is dead (:func:`service.loop.refit_dead`, with
        RQ's facts about its job looked up only for a suspect); the old job, should it still run
        somewhere, is no longer in charge and cannot write. True if this call revived it (one
        caller wins when several look at once)."""
        refit = Refit.of(self.state(campaign_id))
        if not loop.refit_suspect(refit, now, lease):
            return False
        if not loop.refit_dead(refit, now, lease, queues.job_facts(self.r, refit.job)):
            return False
        job_id = uuid.uuid4().hex
        keys = [self.k(campaign_id, "state")]
        if not self._revive(keys=keys, args=[refit.job, job_id, now]):
            return False
        queues.enqueue_refit(self.r, campaign_id, job_id)
        self.wake(campaign_id)
        return True

    def revive_all(self, now: float, lease: float) -> list[str]:
        """:meth:`revive_refit` for every campaign: the ids revived."""
        return [c for c in self.ids() if self.revive_refit(c, now, lease)]

    def beat(self, campaign_id: str, token: str, now: float, start: bool = False) -> bool:
        """The heartbeat of refit ``token`` (``start``: it begins now); False when another
        refit is in charge."""
        keys = [self.k(campaign_id, "state")]
        return bool(self._beat(keys=keys, args=[token, now, "1" if start else "0"]))

    def refit_failed(self, campaign_id: str, message: str, n_seen: int, token: str) -> bool:
        """Record why refit ``token`` failed (if it is in charge); the model stays."""
        event = {"event": "refit_failed", "n_labeled": n_seen, "at": time.time(),
                 "error": message[:2000]}  # fmt: skip
        keys = [self.k(campaign_id, "state"), self.k(campaign_id, "history")]
        recorded = bool(self._fail(keys=keys, args=[token, message[:2000], json.dumps(event)]))
        self.wake(campaign_id)
        return recorded

    def record_evaluation(self, campaign_id: str, version: int, metrics: dict) -> None:
        event = {"event": "evaluate", "version": version, "n_labeled": version, "at": time.time()}
        event.update({k: metrics[k] for k in ("nlml", "rmse", "nlpd_mixture")})
        self.r.rpush(self.k(campaign_id, "history"), json.dumps(event))

    def history(self, campaign_id: str) -> list[dict]:
        self.spec(campaign_id)
        return [json.loads(v) for v in self.r.lrange(self.k(campaign_id, "history"), 0, -1)]

    def end_refit(self, campaign_id: str, n_seen: int, now: float, token: str) -> bool:
        """True when another refit must run (labels came in meanwhile)."""
        keys = [self.k(campaign_id, "state"), self.k(campaign_id, "labels")]
        again = bool(self._end_refit(keys=keys, args=[n_seen, now, token]))
        self.wake(campaign_id)
        return again
