"""The campaign store: the one module that knows the Redis keys.

Per campaign ``{id}`` (prefix ``fbgp:c:{id}:``):

- ``spec``: the campaign's JSON body, as created (with ``id``, ``created_at``, the initial
  design's pool indices), but for an explicit pool's points, of which it keeps the count
  (:func:`service.pool.stored_pool`): they are in ``points``, raw little-endian float64, row
  after row, as codes (:meth:`worker.space.Space.codes`: a value in original units, or a
  choice's value index), so that ``/next`` reads one row and no call parses them all;
- ``state`` (hash): ``refit`` (``idle`` | ``queued`` | ``running``), ``refit_job`` (the id of
  the refit job in charge: the token that fences off every other refit's writes; empty while a
  queued refit waits for its enqueue), ``refit_merge`` (the job that merges a fanned-out refit's
  chain groups), ``queued_at``, ``started_at``, ``heartbeat`` (refreshed while the refit
  runs), ``model_version``, ``last_error``, ``last_refit_seconds``, ``failed_refit_seconds``
  (the longest a refit that failed since the last model ran), ``changes`` (runs failed
  or abandoned so far),
  ``changes_seen`` (``changes`` when the refit in charge started: a refit that ends with more
  runs one more, so that its ranking leaves out points failed since), ``n_failed`` and
  ``n_abandoned`` (every failed and abandoned run, counted),
  ``refit_failures`` (refits failed in a row since the last model: an error, or a job that
  died), ``retry_at`` (when a failed refit runs again: its back-off), ``failed`` (why the
  campaign failed: too many refits failed in a row; empty otherwise), ``stopped`` (the JSON of
  the stopping rule's verdict once it stopped the campaign, :func:`service.loop.stop_verdict`;
  empty otherwise);
- ``jobs`` (sorted set): the campaign's RQ jobs (``refit:<id>`` for refits, chain groups and
  merges, ``short:<id>`` for predictions and the like), by when they may be forgotten: those
  that a delete or a failure stops;
- ``labels`` (list, append-only): one JSON record per label ``{x, y, index, ticket}`` (and
  ``noise``, its known noise variance, in a campaign with known noise); its length
  is the number of labels;
- ``labeled`` (set): pool indices that have a label;
- ``tickets`` (hash): ticket -> JSON ``{x, index, issued_at, expires_at, model_version}``,
  written once (``expires_at`` as issued; a renewal moves only the lease); ``ticket_state``
  (hash): ticket -> ``pending``, ``labeled:<y>`` (``labeled:<y>:<noise>`` with a known
  noise), ``failed:<digest of its reason>`` (:func:`service.loop.failed_state`),
  ``abandoned`` or ``superseded`` (its label came after its point's, without repeats: it can
  never be labeled);
- ``leases`` (sorted set): tickets out now, by expiry; an expired one leaves the set (its point
  is offered again) but may still be labeled while its point has no label; a failed,
  abandoned or superseded one leaves it at once; ``expired`` (sorted set): tickets whose lease
  ran out, by expiry, and tickets that failed, were abandoned or superseded, by when, kept
  ``expired_ticket_seconds`` and then, unless labeled, pruned from ``tickets`` and
  ``ticket_state`` (:data:`EXPIRE_SCRIPT`); ``requests`` (hash): a
  ``/next``'s ``Idempotency-Key`` -> the ticket it was answered with, so that the request
  sent again gets the same ticket while that is out (:data:`CLAIM_SCRIPT`); entries whose
  ticket is no longer out are pruned as the hash grows; ``imports`` (hash): an import's
  ``Idempotency-Key`` -> the SHA-256 of its observations, the labels stored after it and
  their count, so that the import sent again is not stored twice (at most one per import
  stored: bounded by ``max_labels``);
- ``failures`` (list): one JSON record per failed run ``{x, index, ticket, reason, at}``, the
  latest ``keep_runs`` (:data:`KEEP_RUN`; ``n_failed`` counts them all); ``abandons`` (list):
  the latest ``keep_runs`` abandoned runs' ``run_abandoned`` events. The refit never reads
  them: a failed run is no label. ``failed`` (hash): pool index -> its failed runs (more than
  ``max_retries``: not offered again);
- ``model`` (string): the latest model's JSON; ``ranking`` (string): the pool points it ranks
  best, best first; ``history`` (list): one JSON line per model version stored (version, time,
  refit seconds, R-hat, ESS, divergences, its ``accuracy``), evaluation, refit failed,
  campaign stopped by its rule (``stopped``) or resumed by its owner (``resumed``); ``/history``
  adds the runs kept (``run_failed``, ``run_abandoned``; :meth:`CampaignStore.events`).

- ``plots`` (hash): ``{kind}:{output}`` -> the stamp it was drawn at (:meth:`CampaignStore.
  plot_stamp`), a newline, and the page's PNG, so that a picture is drawn once per change of
  the campaign however many pages show it;

- ``token``: the SHA-256 of the campaign's simulator token, then a space and the SHA-256 of its
  owner token (the tokens themselves are not stored).

``fbgp:campaigns`` (set) holds every campaign id; ``fbgp:tokens`` (hash) maps each campaign
token's SHA-256 to the campaign (a simulator token) or to the campaign, a space and ``owner``
(an owner token), and each team token's to ``team:<name>``; ``fbgp:teams`` (hash) maps each
team's name to the JSON ``{created_at}``, ``fbgp:teams:digest`` (hash) each live team's name to
its one token's SHA-256 (a rotation replaces it; a delete removes it, and the team's record too
unless it holds campaigns), and ``fbgp:team:{name}:campaigns`` (set) holds the ids of the
campaigns its token created (kept when the team is deleted: a rotation of the deleted team's
token opens them again, and its name cannot be made anew while it holds any);
``fbgp:metrics:campaigns`` (hash) counts the campaigns in each phase (``design``, ``active``,
``done``, ``failed``). A label is acknowledged only after the Lua
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
from redis.exceptions import RedisError, WatchError

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
from service.settings import get_settings
from service.tokens import new_token, token_digest
from worker.defaults import STOP_TARGETS
from worker.design import initial_design

PREFIX = "fbgp:"
# the pub/sub channel on which a campaign's id is published whenever something changes what its
# /next may answer (a label, an import, a failed or abandoned run, a model, a refit's end)
WAKE_CHANNEL = PREFIX + "wake"
log = logging.getLogger("fbgp.store")
MAX_REASON = 2000  # characters of a failure's reason kept
RESERVE_SIZE = 32  # pool points set aside to stand in for design points that fail, at most
# a refit whose job died (its history's error, and the campaign's if it failed so)
DIED = ("its job ended without a result (its work horse was killed, or ran out of time or "
        "memory, or its worker died)")  # fmt: skip
CAMPAIGNS = PREFIX + "campaigns"
TOKENS = PREFIX + "tokens"
TEAMS = PREFIX + "teams"
TEAM_DIGESTS = PREFIX + "teams:digest"  # hash: a live team's name -> its token's SHA-256
TEAM_GRANT = "team:"  # the start of a team token's entry in TOKENS, before the team's name
PHASES = PREFIX + "metrics:campaigns"  # hash: design, active, done, failed -> campaigns so
# every key of a campaign (``fbgp:c:{id}:{part}``), as the module's docstring lists them
PARTS = ("spec", "points", "state", "labels", "labeled", "tickets", "ticket_state", "leases",
         "failures", "failed", "model", "ranking", "history", "token", "jobs",
         "expired", "requests", "plots", "imports", "abandons")  # fmt: skip
EXPIRED_PRUNE_BATCH = 1000  # expired tickets pruned per look at most
ROW_TYPE = np.dtype("<f8")  # an explicit pool's stored coordinates

# Shared by the scripts that add labels (loop.refit_due): once the design is labeled, mark a refit
# queued with no job in charge (1: the caller enqueues it, ENQUEUE_SCRIPT; should the caller stop
# first, loop.refit_unenqueued). If one is queued or running already, nothing: when it ends it
# sees whether labels arrived after it read them, and runs once more if so (END_REFIT_SCRIPT).
REQUEST_REFIT = """
local function request_refit(state_key, n, design_size, now)
  if n < tonumber(design_size) then return 0 end
  local s = redis.call('HMGET', state_key, 'refit', 'failed')
  if (s[2] or '') ~= '' then return 0 end  -- a failed campaign waits for its owner's retry
  if s[1] == 'idle' then  -- new data: a failed refit's back-off is over
    redis.call('HSET', state_key, 'refit', 'queued', 'queued_at', now, 'retry_at', 0,
               'refit_job', '')  -- no job in charge until the caller's enqueue
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
local function phase(n, design_size, max_labels, failed, stopped)
  if failed then return 'failed' end
  if n >= tonumber(max_labels) or stopped then return 'done' end
  if n < tonumber(design_size) then return 'design' end
  return 'active'
end
local function add_phase(phases_key, name, count)
  if redis.call('EXISTS', phases_key) == 1 then redis.call('HINCRBY', phases_key, name, count) end
end
local function has_failed(state_key)
  return (redis.call('HGET', state_key, 'failed') or '') ~= ''
end
local function is_stopped(state_key)
  return (redis.call('HGET', state_key, 'stopped') or '') ~= ''
end
local function move_phase(phases_key, before, after, design_size, max_labels, state_key)
  local failed, stopped = has_failed(state_key), is_stopped(state_key)
  local from = phase(before, design_size, max_labels, failed, stopped)
  local to = phase(after, design_size, max_labels, failed, stopped)
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
local counts = {design = 0, active = 0, done = 0, failed = 0}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  local raw = redis.call('GET', ARGV[1] .. id .. ':spec')
  if raw then
    local spec = cjson.decode(raw)
    local n = redis.call('LLEN', ARGV[1] .. id .. ':labels')
    local state = ARGV[1] .. id .. ':state'
    local name = phase(n, spec['initial_design']['size'], spec['max_labels'], has_failed(state),
                       is_stopped(state))
    counts[name] = counts[name] + 1
  end
end
redis.call('HSET', KEYS[1], 'design', counts.design, 'active', counts.active, 'done', counts.done,
           'failed', counts.failed)
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
  end_ticket(KEYS[2], KEYS[3], ARGV[1], 'superseded')  -- it can never be labeled
  redis.call('ZADD', KEYS[8], ARGV[8], ARGV[1])  -- pruned as an expired one is
  return {'conflict', n, 0}
end
if n >= tonumber(ARGV[5]) then return {'done', n, 0} end
end_ticket(KEYS[2], KEYS[3], ARGV[1], 'labeled:' .. ARGV[2])
redis.call('RPUSH', KEYS[4], ARGV[3])
if ARGV[4] ~= '' then redis.call('SADD', KEYS[5], ARGV[4]) end
move_phase(KEYS[7], n, n + 1, ARGV[7], ARGV[5], KEYS[6])
n = n + 1
return {'stored', n, request_refit(KEYS[6], n, ARGV[7], ARGV[8])}
"""
)

# Shared by the scripts that end a ticket's run without a label (a failure, an abandon): the
# run's record appended to a list that keeps the latest ARGV keep (all are counted elsewhere),
# and the ticket handed to the pruning of expired ones (EXPIRE_SCRIPT), so that a simulator that
# keeps failing or giving points back costs a bounded amount of memory.
KEEP_RUN = """
local function keep_run(list_key, record, keep, expired_key, now, ticket)
  redis.call('RPUSH', list_key, record)
  redis.call('LTRIM', list_key, -tonumber(keep), -1)
  redis.call('ZADD', expired_key, now, ticket)
end
"""

# Ends a pending ticket's run as failed (loop.fail_outcome): its lease ends, the failure is
# kept (KEEP_RUN) and counted (``n_failed``; a store from before the count counts its list),
# its point's count of failures goes up, and once the design is labeled a refit is requested
# (loop.refit_due) so that the ranking leaves the point out if it failed for good.
# KEYS: ticket_state, leases, failures, failed, state, expired, labels; ARGV: ticket,
# loop.failed_state, record, index, design size, now, keep, the reason. Returns {outcome, n_failed,
# enqueue_refit}, the outcome a loop.RunOutcome value.
FAIL_RUN_SCRIPT = (
    REQUEST_REFIT
    + END_TICKET
    + KEEP_RUN
    + """
local failed = tonumber(redis.call('HGET', KEYS[5], 'n_failed') or redis.call('LLEN', KEYS[3]))
local outcome = ended(KEYS[1], ARGV[1], ARGV[2])
if outcome == 'conflict' and redis.call('HGET', KEYS[1], ARGV[1]) == 'failed:' .. ARGV[8] then
  outcome = 'same_again'  -- it failed before states held a digest, for the same reason
end
if outcome then return {outcome, failed, 0} end
end_ticket(KEYS[1], KEYS[2], ARGV[1], ARGV[2])
keep_run(KEYS[3], ARGV[3], ARGV[7], KEYS[6], ARGV[6], ARGV[1])
if ARGV[4] ~= '' then redis.call('HINCRBY', KEYS[4], ARGV[4], 1) end
redis.call('HINCRBY', KEYS[5], 'changes', 1)
redis.call('HSET', KEYS[5], 'n_failed', failed + 1)
local n = redis.call('LLEN', KEYS[7])
return {'stored', failed + 1, request_refit(KEYS[5], n, ARGV[5], ARGV[6])}
"""
)

# Abandons a pending ticket (loop.abandon_outcome): its lease ends, its point is free again,
# the abandon is kept (KEEP_RUN) and counted; once the design is labeled a refit is requested
# (the ranking takes the point back). KEYS: ticket_state, leases, state, abandons, labels,
# expired; ARGV: ticket, design size, now, record, keep. Returns {outcome, n_abandoned,
# enqueue_refit}.
ABANDON_SCRIPT = (
    REQUEST_REFIT
    + END_TICKET
    + KEEP_RUN
    + """
local abandoned = tonumber(redis.call('HGET', KEYS[3], 'n_abandoned') or '0')
local outcome = ended(KEYS[1], ARGV[1], 'abandoned')
if outcome then return {outcome, abandoned, 0} end
end_ticket(KEYS[1], KEYS[2], ARGV[1], 'abandoned')
redis.call('HINCRBY', KEYS[3], 'changes', 1)
abandoned = redis.call('HINCRBY', KEYS[3], 'n_abandoned', 1)
keep_run(KEYS[4], ARGV[4], ARGV[5], KEYS[6], ARGV[3], ARGV[1])
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
# point labeled already or twice among them (loop.import_outcome). KEYS: labels, labeled, state,
# PHASES, spec, imports. Returns {outcome, n, enqueue}, the outcome a loop.ImportOutcome value,
# or 'gone' (the campaign was deleted meanwhile: nothing written), or {'held', 0, 0, record}
# when its Idempotency-Key ARGV[6 + 2 count] was stored before (record: "digest n count"); a
# stored import's key is kept with the digest ARGV[7 + 2 count] of its observations.
IMPORT_SCRIPT = (
    REQUEST_REFIT
    + COUNT_PHASES
    + """
if redis.call('EXISTS', KEYS[5]) == 0 then return {'gone', 0, 0} end
local n = redis.call('LLEN', KEYS[1])
local count = tonumber(ARGV[1])
local key, digest = ARGV[6 + 2 * count], ARGV[7 + 2 * count]
if key ~= '' then
  local held = redis.call('HGET', KEYS[6], key)
  if held then return {'held', 0, 0, held} end
end
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
move_phase(KEYS[4], n, n + count, ARGV[3], ARGV[2], KEYS[3])
n = n + count
if key ~= '' then redis.call('HSET', KEYS[6], key, digest .. ' ' .. n .. ' ' .. count) end
return {'stored', n, request_refit(KEYS[3], n, ARGV[3], ARGV[4 + 2 * count])}
"""
)

# Deletes campaign ARGV[1], all or nothing: its keys (KEYS[10..]), its id from the index and
# from its team's set, its tokens, and its count in its phase. KEYS: spec, labels, token, the
# index, the tokens, PHASES, state, jobs, its team's set (one that never exists when it has no
# team: no team is named ''), then every part; ARGV: id, design size, max_labels. Returns {0}
# if it was gone already, else {1, its jobs...} (for the caller to stop).
DELETE_SCRIPT = (
    COUNT_PHASES
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {0} end
local n = redis.call('LLEN', KEYS[2])
local digest = redis.call('GET', KEYS[3])
add_phase(KEYS[6], phase(n, ARGV[2], ARGV[3], has_failed(KEYS[7]), is_stopped(KEYS[7])), -1)
local out = {1}
for _, job in ipairs(redis.call('ZRANGE', KEYS[8], 0, -1)) do out[#out + 1] = job end
for i = 10, #KEYS do redis.call('UNLINK', KEYS[i]) end
redis.call('SREM', KEYS[4], ARGV[1])
redis.call('SREM', KEYS[9], ARGV[1])
if digest then
  for d in string.gmatch(digest, '%S+') do redis.call('HDEL', KEYS[5], d) end
end
return out
"""
)

# Ends the refit ARGV[3] that saw ARGV[1] labels: 1 if another one must run (more labels came,
# or runs failed or were abandoned since it started: loop.refit_again; it is queued with no job
# in charge until the caller's enqueue), else 0 (also when that refit is no longer in charge).
END_REFIT_SCRIPT = """
if redis.call('HGET', KEYS[1], 'refit_job') ~= ARGV[3] then return 0 end
local n = redis.call('LLEN', KEYS[2])
local changes = redis.call('HGET', KEYS[1], 'changes') or '0'
local seen = redis.call('HGET', KEYS[1], 'changes_seen') or '0'
if n > tonumber(ARGV[1]) or changes ~= seen then
  redis.call('HSET', KEYS[1], 'refit', 'queued', 'queued_at', ARGV[2], 'refit_job', '')
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
  redis.call('HSET', KEYS[1], 'refit', 'running', 'started_at', ARGV[2], 'changes_seen', changes,
             'refit_merge', '')
end
redis.call('HSET', KEYS[1], 'heartbeat', ARGV[2])
return 1
"""

# Hands the refit over from job ARGV[1] (found dead) to job ARGV[2]; 1 if this call did it.
# Shared by the scripts that end a refit that failed (an error, or its job died): its failures
# in a row counted; at p.attempts the campaign fails (3: no refit in charge, counted as failed,
# p.reason recorded); else it is queued under job p.job at once (1: the first death in a row) or
# left to its back-off (2: idle until retry_at, loop.backoff). keys: state, labels, PHASES,
# history; p: job, now, attempts, base, cap, died, reason, design_size, max_labels.
AFTER_FAILURE = (
    COUNT_PHASES
    + """
local function after_failure(keys, p)
  if redis.call('HGET', keys[1], 'refit') == 'running' then  -- how long the failed one ran
    -- (one that died: until its last heartbeat, not until its death was noticed)
    local ended = p.now
    if p.died then ended = tonumber(redis.call('HGET', keys[1], 'heartbeat') or p.now) end
    local ran = ended - tonumber(redis.call('HGET', keys[1], 'started_at') or ended)
    if ran > tonumber(redis.call('HGET', keys[1], 'failed_refit_seconds') or '0') then
      redis.call('HSET', keys[1], 'failed_refit_seconds', string.format('%.3f', ran))
    end
  end
  local k = redis.call('HINCRBY', keys[1], 'refit_failures', 1)
  if k >= tonumber(p.attempts) then
    local n = redis.call('LLEN', keys[2])
    add_phase(keys[3], phase(n, p.design_size, p.max_labels, false, is_stopped(keys[1])), -1)
    add_phase(keys[3], 'failed', 1)
    redis.call('HSET', keys[1], 'refit', 'idle', 'refit_job', '', 'retry_at', 0,
               'failed', p.reason, 'last_error', p.reason)
    redis.call('RPUSH', keys[4], cjson.encode({event = 'failed', at = p.now, reason = p.reason,
                                               n_labeled = n}))
    return 3
  end
  local delay = 0
  local doublings = k - 1
  if p.died then doublings = k - 2 end
  if doublings >= 0 then delay = math.min(p.cap, p.base * 2 ^ doublings) end
  if delay > 0 then
    redis.call('HSET', keys[1], 'refit', 'idle', 'refit_job', '',
               'retry_at', string.format('%.6f', p.now + delay))
    return 2
  end
  redis.call('HSET', keys[1], 'refit', 'queued', 'queued_at', string.format('%.6f', p.now),
             'refit_job', p.job, 'retry_at', 0)
  return 1
end
"""
)

# Ends refit ARGV[1] (found dead) if it is still in charge (AFTER_FAILURE: 1 queued again under
# a new job, 2 backing off, 3 the campaign failed); 0 if another call did it first.
# KEYS: state, labels, PHASES, history; ARGV: the dead job, the JSON of AFTER_FAILURE's p, the
# history event.
REVIVE_SCRIPT = (
    AFTER_FAILURE
    + """
if redis.call('HGET', KEYS[1], 'refit_job') ~= ARGV[1] then return 0 end
redis.call('RPUSH', KEYS[4], ARGV[3])
return after_failure(KEYS, cjson.decode(ARGV[2]))
"""
)

# Puts job ARGV[1] in charge of a refit that was queued but whose job ARGV[3] ('' for none) never
# reached RQ (loop.refit_unenqueued), from ARGV[2] on. KEYS: state. 1 if this call did it (one
# caller wins when several look at once).
ADOPT_SCRIPT = """
local s = redis.call('HMGET', KEYS[1], 'refit', 'refit_job', 'failed')
if s[1] ~= 'queued' or (s[2] or '') ~= ARGV[3] or (s[3] or '') ~= '' then return 0 end
redis.call('HSET', KEYS[1], 'refit_job', ARGV[1], 'queued_at', ARGV[2])
return 1
"""

# Notes job ARGV[2] as the merge of refit ARGV[1]'s chain groups, if that refit is still in charge
# (loop.JobFacts.merging). KEYS: state. 1 if so.
NOTE_MERGE_SCRIPT = """
if redis.call('HGET', KEYS[1], 'refit_job') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'refit_merge', ARGV[2])
return 1
"""

# Queues a failed refit whose back-off ran out (loop.retry_due) under job ARGV[1]. KEYS: state;
# ARGV: job, now. 1 if so.
RETRY_DUE_SCRIPT = """
local s = redis.call('HMGET', KEYS[1], 'refit', 'failed', 'retry_at')
if s[1] ~= 'idle' or (s[2] or '') ~= '' then return 0 end
local at = tonumber(s[3]) or 0
if at <= 0 or at > tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], 'refit', 'queued', 'queued_at', ARGV[2], 'refit_job', ARGV[1],
           'retry_at', 0)
return 1
"""

# The owner's retry of a campaign that cannot go on by itself. A failed one (its refits failed
# too often in a row): its failed state and count cleared, counted in its phase again. A failing
# one (more failed runs since the last retry than ARGV[5], loop.failing), or one that stalled
# (ARGV[6] = '1', loop.stalled): its failed runs are forgiven, n_forgiven = n_failed (they count
# no more towards failing), and its points' counts of failures dropped, so every point failed
# for good is offered again. Then, once its design is labeled, a refit is queued under job
# ARGV[1] (a failed one's), or requested (the ranking must take the forgiven points back).
# KEYS: state, labels, PHASES, failed, failures; ARGV: job, now, design size, max_labels,
# failure limit, stalled. 0: nothing to retry; 1: cleared; 2: cleared and a refit queued.
RETRY_SCRIPT = (
    COUNT_PHASES
    + REQUEST_REFIT
    + """
local refit_failed = has_failed(KEYS[1])
local s = redis.call('HMGET', KEYS[1], 'n_failed', 'n_forgiven')
local n_failed = tonumber(s[1] or redis.call('LLEN', KEYS[5]))
local failing = n_failed - tonumber(s[2] or '0') > tonumber(ARGV[5])
local forgive = failing or ARGV[6] == '1'
if not refit_failed and not forgive then return 0 end
local n = redis.call('LLEN', KEYS[2])
if forgive then
  redis.call('DEL', KEYS[4])
  redis.call('HSET', KEYS[1], 'n_failed', n_failed, 'n_forgiven', n_failed)
  redis.call('HINCRBY', KEYS[1], 'changes', 1)
end
if not refit_failed then
  if request_refit(KEYS[1], n, ARGV[3], ARGV[2]) == 0 then return 1 end
  redis.call('HSET', KEYS[1], 'refit_job', ARGV[1])  -- in charge of the refit it requested
  return 2
end
add_phase(KEYS[3], 'failed', -1)
add_phase(KEYS[3], phase(n, ARGV[3], ARGV[4], false, is_stopped(KEYS[1])), 1)
redis.call('HSET', KEYS[1], 'failed', '', 'refit_failures', 0, 'retry_at', 0)
if n < tonumber(ARGV[3]) then return 1 end
redis.call('HSET', KEYS[1], 'refit', 'queued', 'queued_at', ARGV[2], 'refit_job', ARGV[1])
return 2
"""
)

# Puts job ARGV[1] in charge of the campaign's queued refit from now (its grace for the enqueue,
# loop.ENQUEUE_GRACE_SECONDS, starts again) and notes it among its jobs (TRACK).
# KEYS: spec, state, jobs; ARGV: job, member, forget at, now. 0 (nothing written) if the campaign
# is gone, failed, or has no refit queued.
ENQUEUE_SCRIPT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local s = redis.call('HMGET', KEYS[2], 'refit', 'failed')
if s[1] ~= 'queued' or (s[2] or '') ~= '' then return 0 end
redis.call('HSET', KEYS[2], 'refit_job', ARGV[1], 'queued_at', ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[4])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[2])
return 1
"""

# Notes jobs ARGV[3..] (members ``refit:<id>`` or ``short:<id>``) among the campaign's jobs
# (KEYS[2]) until ARGV[2], and forgets those whose time ran out before ARGV[1]. KEYS: spec, jobs.
# 0 (nothing written) if the campaign is gone.
TRACK_SCRIPT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[1])
for i = 3, #ARGV do redis.call('ZADD', KEYS[2], ARGV[2], ARGV[i]) end
return 1
"""

# Notes model call ARGV[3] (``short:<id>``) among the campaign's jobs (KEYS[2]) until ARGV[2]
# unless ARGV[4] such calls are out already (their time not run out before ARGV[1]). KEYS: spec,
# jobs. 1: noted; 0: the campaign is gone; -1: too many out.
ADMIT_SHORT_SCRIPT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[1])
local out = 0
for _, member in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  if string.sub(member, 1, 6) == 'short:' then out = out + 1 end
end
if out >= tonumber(ARGV[4]) then return -1 end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
return 1
"""

# Issues tickets if the campaign still exists: per ticket ARGV[i..i+2] (id, JSON, expiry).
# KEYS: spec, tickets, ticket_state, leases. 0 (nothing written) if the campaign is gone.
ISSUE_SCRIPT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
for i = 1, #ARGV, 3 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  redis.call('HSET', KEYS[3], ARGV[i], 'pending')
  redis.call('ZADD', KEYS[4], ARGV[i + 2], ARGV[i])
end
return 1
"""

# Shared by the scripts that answer a /next sent again with its Idempotency-Key: whether a
# ticket is out (pending, its lease not run out at ARGV now), and its answer {ticket, info,
# expiry}. KEYS: requests, ticket_state, leases, tickets.
LIVE_TICKET = """
local function live(ticket, now)
  if not ticket or redis.call('HGET', KEYS[2], ticket) ~= 'pending' then return false end
  local expiry = redis.call('ZSCORE', KEYS[3], ticket)
  return expiry and tonumber(expiry) >= now
end
local function answer(ticket)
  return {ticket, redis.call('HGET', KEYS[4], ticket), redis.call('ZSCORE', KEYS[3], ticket)}
end
"""

# The ticket that answered the Idempotency-Key ARGV[1], if it is still out (else nil).
# KEYS as LIVE_TICKET's; ARGV: key, now.
REPLAY_SCRIPT = (
    LIVE_TICKET
    + """
local ticket = redis.call('HGET', KEYS[1], ARGV[1])
if live(ticket, tonumber(ARGV[2])) then return answer(ticket) end
return nil
"""
)

# Binds the Idempotency-Key ARGV[1] to the ticket ARGV[2] just issued for it, unless the key
# answers another ticket still out (the same request, sent again while the first was waiting:
# that ticket wins, the caller withdraws its own). Returns the winner's answer, or nil if the
# campaign is gone. Once the hash holds more than twice the tickets out (and 64), the keys
# whose tickets are no longer out are dropped: amortized, a claim costs O(1). KEYS: requests,
# ticket_state, leases, tickets, spec; ARGV: key, ticket, now.
CLAIM_SCRIPT = (
    LIVE_TICKET
    + """
if redis.call('EXISTS', KEYS[5]) == 0 then return nil end
local now = tonumber(ARGV[3])
local held = redis.call('HGET', KEYS[1], ARGV[1])
if held and held ~= ARGV[2] and live(held, now) then return answer(held) end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if redis.call('HLEN', KEYS[1]) > 2 * redis.call('ZCARD', KEYS[3]) + 64 then
  local entries = redis.call('HGETALL', KEYS[1])
  for i = 1, #entries, 2 do
    if not live(entries[i + 1], now) then redis.call('HDEL', KEYS[1], entries[i]) end
  end
end
return answer(ARGV[2])
"""
)

# Moves the tickets whose lease ran out before ARGV[1] from the leases (KEYS[1]) to the expired
# ones (KEYS[2], by expiry; their points are offered again; a run that failed or was abandoned,
# or a ticket superseded, joins them by when it ended), and prunes up to ARGV[3] of those that
# expired or ended before ARGV[2]: unless labeled, from the tickets (KEYS[3]) and their states
# (KEYS[4]), so that a late label or report for one is an unknown ticket (a labeled one stays,
# so that its label sent again is still recognized; labels are bounded by max_labels). Returns
# how many left the expired set.
EXPIRE_SCRIPT = """
local out = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'WITHSCORES')
for i = 1, #out, 2 do redis.call('ZADD', KEYS[2], out[i + 1], out[i]) end
if #out > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1]) end
local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[2], 'LIMIT', 0,
                       tonumber(ARGV[3]))
for _, ticket in ipairs(old) do
  local state = redis.call('HGET', KEYS[4], ticket)
  if state and string.sub(state, 1, 8) ~= 'labeled:' then
    redis.call('HDEL', KEYS[3], ticket)
    redis.call('HDEL', KEYS[4], ticket)
  end
  redis.call('ZREM', KEYS[2], ticket)
end
return #old
"""

# Writes to KEYS[2] if the campaign (KEYS[1]: spec) still exists, so that a write that races its
# delete leaves no key behind: the command ARGV[1] (RPUSH, HSET) with the arguments after it.
# Returns 1 if written.
WRITE_IF_CAMPAIGN_SCRIPT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call(ARGV[1], KEYS[2], unpack(ARGV, 2))
return 1
"""

# Stores the model of refit ARGV[1] if it is still in charge and the model is not older than
# the stored one: 1 stored, 0 older, -1 not in charge (or the campaign is gone).
# With a stopping rule's verdict ARGV[7] (loop.stop_verdict met by this model; '' if none), the
# campaign stops in the same step, so that no /next sees the model without the stop: unless it
# has failed, stopped already, or has max_labels labels, its state's ``stopped`` is set, its
# history gets the event ARGV[8] and its count by phase moves to done (2: stored and stopped).
# KEYS: state, history, model, ranking, labels, PHASES; ARGV[9], ARGV[10]: design size,
# max_labels.
SAVE_MODEL_SCRIPT = (
    COUNT_PHASES
    + """
if redis.call('HGET', KEYS[1], 'refit_job') ~= ARGV[1] then return -1 end
local current = redis.call('HGET', KEYS[1], 'model_version')
if current and tonumber(current) > tonumber(ARGV[2]) then return 0 end
redis.call('RPUSH', KEYS[2], ARGV[3])
redis.call('SET', KEYS[3], ARGV[4])
redis.call('SET', KEYS[4], ARGV[5])
redis.call('HSET', KEYS[1], 'model_version', ARGV[2], 'last_error', '',
           'last_refit_seconds', ARGV[6], 'refit_failures', 0, 'retry_at', 0,
           'failed_refit_seconds', 0)
if (ARGV[7] or '') == '' or has_failed(KEYS[1]) or is_stopped(KEYS[1]) then return 1 end
local n = redis.call('LLEN', KEYS[5])
if n >= tonumber(ARGV[10]) then return 1 end
add_phase(KEYS[6], phase(n, ARGV[9], ARGV[10]), -1)
add_phase(KEYS[6], 'done', 1)
redis.call('HSET', KEYS[1], 'stopped', ARGV[7])
redis.call('RPUSH', KEYS[2], ARGV[8])
return 2
"""
)

# Records the failure of refit ARGV[1] (its error ARGV[2], its history event ARGV[3]) if it is
# still in charge, and what comes next (AFTER_FAILURE: 1, 2 or 3); 0 if it is not in charge.
# KEYS: state, labels, PHASES, history; ARGV[4]: the JSON of AFTER_FAILURE's p.
FAIL_SCRIPT = (
    AFTER_FAILURE
    + """
if redis.call('HGET', KEYS[1], 'refit_job') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'last_error', ARGV[2])
redis.call('RPUSH', KEYS[4], ARGV[3])
return after_failure(KEYS, cjson.decode(ARGV[4]))
"""
)


# Gives team ARGV[1] the token whose SHA-256 is ARGV[2]. With ARGV[4] 'create', a new team
# (its record ARGV[3], with the tenant of its refits added: of 1 .. ARGV[5] - 1, the one the
# fewest teams have, the lowest of those; service.queues.TENANTS): 0 if the name is a live
# team's, -1 if it is a deleted team's that still holds campaigns (a rotation makes that one
# live again), else 1. With 'rotate', in place of its token (the old one gone from the tokens at
# once), a deleted team live again: 0 if there is no such team, else 1. KEYS: TEAMS,
# TEAM_DIGESTS, TOKENS, the team's set.
TEAM_TOKEN_SCRIPT = """
local known = redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1
local old = redis.call('HGET', KEYS[2], ARGV[1])
if ARGV[4] == 'create' then
  if old then return 0 end
  if known and redis.call('SCARD', KEYS[4]) > 0 then return -1 end
  local held = {}
  for _, raw in ipairs(redis.call('HVALS', KEYS[1])) do
    local t = cjson.decode(raw)['tenant']
    if t then held[t] = (held[t] or 0) + 1 end
  end
  local tenant, fewest = 1, nil
  for t = 1, tonumber(ARGV[5]) - 1 do
    if fewest == nil or (held[t] or 0) < fewest then tenant, fewest = t, held[t] or 0 end
  end
  local record = cjson.decode(ARGV[3])
  record['tenant'] = tenant
  redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(record))
else
  if not known then return 0 end
  if old then redis.call('HDEL', KEYS[3], old) end
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[3], ARGV[2], 'team:' .. ARGV[1])
return 1
"""

# Deletes team ARGV[1]'s token; the team's record goes too unless it still holds campaigns
# (then it stays, deleted, so that its name is not made anew by mistake). KEYS: TEAMS,
# TEAM_DIGESTS, TOKENS, the team's set. 1 if it was a live team, 0 if not.
DELETE_TEAM_SCRIPT = """
local old = redis.call('HGET', KEYS[2], ARGV[1])
if not old then return 0 end
redis.call('HDEL', KEYS[3], old)
redis.call('HDEL', KEYS[2], ARGV[1])
if redis.call('SCARD', KEYS[4]) == 0 then redis.call('HDEL', KEYS[1], ARGV[1]) end
return 1
"""


# The owner's resume of a campaign its stopping rule stopped: the stop cleared, counted in its
# phase again, the event ARGV[1] in its history; with ARGV[5] (a new spec: its rule replaced)
# the spec set to it if it is still ARGV[4]. KEYS: state, labels, PHASES, history, spec; ARGV:
# event, design size, max_labels, old spec, new spec or ''. 1 resumed, 0 not stopped, -1 the
# spec changed meanwhile.
RESUME_SCRIPT = (
    COUNT_PHASES
    + """
if not is_stopped(KEYS[1]) then return 0 end
if ARGV[5] ~= '' then
  if redis.call('GET', KEYS[5]) ~= ARGV[4] then return -1 end
  redis.call('SET', KEYS[5], ARGV[5])
end
local n = redis.call('LLEN', KEYS[2])
local failed = has_failed(KEYS[1])
add_phase(KEYS[3], phase(n, ARGV[2], ARGV[3], failed, true), -1)
add_phase(KEYS[3], phase(n, ARGV[2], ARGV[3], failed, false), 1)
redis.call('HSET', KEYS[1], 'stopped', '')
redis.call('RPUSH', KEYS[4], ARGV[1])
return 1
"""
)


class TeamFull(Exception):
    """A team holds as many campaigns as it may."""


class TeamGone(Exception):
    """The token that would create a team's campaign is no longer the team's."""


def _team_tenant(name: str, record: dict) -> int:
    """A team's tenant: the one its record was given when it was made, or, for a team made
    before tenants were given, its name's (:func:`service.queues.tenant`)."""
    given = record.get("tenant")
    return queues.tenant(name) if given is None else int(given)


def design_reserve(pool, design: list[int], seed: int) -> list[int]:
    """Pool indices, in a seeded random order, that stand in for design points failed for good
    (:func:`service.loop.design_points`): up to ``RESERVE_SIZE``, none of the design's."""
    size = min(RESERVE_SIZE, pool.size - len(design))
    rng = np.random.default_rng([int(seed), 1])
    reserve = pool.subsample(size, rng, exclude=design)
    return [int(i) for i in rng.permutation(reserve)]


def _held_import(held: bytes, digest: str) -> tuple[ImportOutcome, int, int]:
    """An import's record under its Idempotency-Key (``digest n count``), as
    :meth:`CampaignStore.imported` answers it."""
    stored, n, count = held.decode().split()
    outcome = ImportOutcome.SAME_AGAIN if stored == digest else ImportOutcome.KEY_REUSED
    return outcome, int(n), int(count)


def _ticket_answer(found: list) -> dict:
    """A ticket as ``/next`` answers it, from a script's ``{ticket, info, expiry}``."""
    ticket, info, expiry = found
    info = json.loads(info)
    return {"ticket": ticket.decode(), "x": info["x"], "expires_at": float(expiry),
            "model_version": info["model_version"]}  # fmt: skip


class CampaignStore:
    def __init__(self, redis: Redis):
        self.r = redis
        self._label = redis.register_script(LABEL_SCRIPT)
        self._import = redis.register_script(IMPORT_SCRIPT)
        self._end_refit = redis.register_script(END_REFIT_SCRIPT)
        self._beat = redis.register_script(BEAT_SCRIPT)
        self._revive = redis.register_script(REVIVE_SCRIPT)
        self._adopt = redis.register_script(ADOPT_SCRIPT)
        self._note_merge = redis.register_script(NOTE_MERGE_SCRIPT)
        self._save_model = redis.register_script(SAVE_MODEL_SCRIPT)
        self._fail = redis.register_script(FAIL_SCRIPT)
        self._fail_run = redis.register_script(FAIL_RUN_SCRIPT)
        self._abandon = redis.register_script(ABANDON_SCRIPT)
        self._renew = redis.register_script(RENEW_SCRIPT)
        self._delete = redis.register_script(DELETE_SCRIPT)
        self._count_created = redis.register_script(COUNT_CREATED)
        self._rebuild_phases = redis.register_script(REBUILD_PHASES)
        self._retry_due = redis.register_script(RETRY_DUE_SCRIPT)
        self._retry = redis.register_script(RETRY_SCRIPT)
        self._enqueue = redis.register_script(ENQUEUE_SCRIPT)
        self._track = redis.register_script(TRACK_SCRIPT)
        self._admit_short = redis.register_script(ADMIT_SHORT_SCRIPT)
        self._issue = redis.register_script(ISSUE_SCRIPT)
        self._expire = redis.register_script(EXPIRE_SCRIPT)
        self._replay = redis.register_script(REPLAY_SCRIPT)
        self._claim = redis.register_script(CLAIM_SCRIPT)
        self._write_if_campaign = redis.register_script(WRITE_IF_CAMPAIGN_SCRIPT)
        self._resume = redis.register_script(RESUME_SCRIPT)
        self._team_token = redis.register_script(TEAM_TOKEN_SCRIPT)
        self._delete_team = redis.register_script(DELETE_TEAM_SCRIPT)

    @staticmethod
    def k(campaign_id: str, part: str) -> str:
        return f"{PREFIX}c:{campaign_id}:{part}"

    @staticmethod
    def team_key(team: str) -> str:
        """The set of the campaigns team ``team``'s token created."""
        return f"{PREFIX}team:{team}:campaigns"

    # -- campaigns ---------------------------------------------------------------------------
    def create(self, body: dict, team: tuple[str, str] | None = None,
               team_limit: int = 0) -> dict:  # fmt: skip
        """The campaign of ``body``, stored; with ``team`` (its name and its token's SHA-256:
        the token that creates it), the team's, all in one transaction with the check that
        the token is still the team's (:class:`TeamGone` if it was rotated or deleted
        meanwhile) and holds fewer than ``team_limit`` campaigns (:class:`TeamFull`)."""
        campaign_id = uuid.uuid4().hex[:16]
        name = None if team is None else team[0]
        if name is not None and self.r.scard(self.team_key(name)) >= team_limit:
            raise TeamFull(name)  # before the design's work; checked again below
        tenant = 0 if name is None else self.team_tenant(name)
        spec = dict(body, id=campaign_id, created_at=time.time(), team=name, tenant=tenant)
        pool = pools.pool_of(spec)
        design = initial_design(pool, spec["initial_design"]["size"], spec["seed"],
                                warp=pools.space_of(spec).stratify)  # fmt: skip
        spec["design_index"] = [int(i) for i in design]
        spec["design_reserve"] = design_reserve(pool, spec["design_index"], spec["seed"])
        stored = json.dumps(dict(spec, pool=pools.stored_pool(spec["pool"])))
        points = None
        if pools.explicit(spec):
            points = pools.space_of(spec).codes(spec["pool"]["points"]).astype(ROW_TYPE)
        with self.r.pipeline() as pipe:
            while True:
                try:
                    if team is not None:
                        self._check_team(pipe, team, team_limit)
                    pipe.multi()
                    pipe.set(self.k(campaign_id, "spec"), stored)
                    if points is not None:
                        pipe.set(self.k(campaign_id, "points"), points.tobytes())
                    pipe.hset(self.k(campaign_id, "state"), mapping={"refit": "idle"})
                    pipe.sadd(CAMPAIGNS, campaign_id)
                    if name is not None:
                        pipe.sadd(self.team_key(name), campaign_id)
                    phase = str(loop.phase(Rules.of(spec), 0))
                    self._count_created(keys=[PHASES], args=[phase], client=pipe)
                    pipe.execute()
                    return spec
                except WatchError:  # the team changed between the check and the writes
                    continue

    def _check_team(self, pipe, team: tuple[str, str], limit: int) -> None:
        """Watches the team's token and set on ``pipe`` and checks them (see :meth:`create`)."""
        name, digest = team
        pipe.watch(TEAM_DIGESTS, self.team_key(name))
        held = pipe.hget(TEAM_DIGESTS, name)
        if held is None or held.decode() != digest:
            raise TeamGone(name)
        if pipe.scard(self.team_key(name)) >= limit:
            raise TeamFull(name)

    def issue_tokens(self, campaign_id: str) -> tuple[str, str]:
        """The campaign's two access tokens, its simulators' and its owner's, returned once;
        only their digests are kept."""
        simulator, owner = new_token(), new_token()
        digests = token_digest(simulator), token_digest(owner)
        pipe = self.r.pipeline()
        pipe.hset(TOKENS, mapping={digests[0]: campaign_id, digests[1]: f"{campaign_id} owner"})
        pipe.set(self.k(campaign_id, "token"), " ".join(digests))
        pipe.execute()
        return simulator, owner

    def token_grant(self, token: str) -> tuple[str, str] | None:
        """Whose token this is, if any: a campaign and the token's scope (``simulator`` or
        ``owner``), or a team's name and ``team``."""
        grant = self.r.hget(TOKENS, token_digest(token))
        if grant is None:
            return None
        grant = grant.decode()
        if grant.startswith(TEAM_GRANT):
            return grant.removeprefix(TEAM_GRANT), "team"
        campaign_id, _, scope = grant.partition(" ")
        return campaign_id, scope or "simulator"

    # -- teams -------------------------------------------------------------------------------
    def _team_keys(self, name: str) -> list[str]:
        return [TEAMS, TEAM_DIGESTS, TOKENS, self.team_key(name)]

    def create_team(self, name: str, now: float) -> str | int:
        """A new team's token (returned once, its digest kept); 0 if the name is a live
        team's, -1 if a deleted team's that still holds campaigns."""
        token = new_token()
        record = json.dumps({"created_at": now})
        done = self._team_token(keys=self._team_keys(name),
                                args=[name, token_digest(token), record, "create",
                                      queues.TENANTS])  # fmt: skip
        return token if done == 1 else int(done)

    def rotate_team_token(self, name: str) -> str | None:
        """A new token for team ``name`` in place of its old one (a deleted team's: it is live
        again), or None if there is no such team."""
        token = new_token()
        done = self._team_token(keys=self._team_keys(name),
                                args=[name, token_digest(token), "", "rotate",
                                      queues.TENANTS])  # fmt: skip
        return token if done else None

    def delete_team(self, name: str) -> bool:
        """Team ``name``'s token gone, and the team with it unless it holds campaigns (they
        stay); False if there was no live team of that name."""
        return bool(self._delete_team(keys=self._team_keys(name), args=[name]))

    def teams(self) -> list[dict]:
        """Every team: its name, when it was made, whether its token is live (a deleted team
        that holds campaigns stays, not live), how many campaigns it has, and the tenant its
        campaigns' refits queue under."""
        records = sorted(self.r.hgetall(TEAMS).items())
        live = {n.decode() for n in self.r.hkeys(TEAM_DIGESTS)}
        pipe = self.r.pipeline()
        for name, _ in records:
            pipe.scard(self.team_key(name.decode()))
        counts = pipe.execute()
        out = []
        for (name, raw), count in zip(records, counts, strict=True):
            name, record = name.decode(), json.loads(raw)
            out.append({"name": name, "created_at": record["created_at"], "live": name in live,
                        "n_campaigns": int(count),
                        "tenant": _team_tenant(name, record)})  # fmt: skip
        return out

    def team_tenant(self, name: str) -> int:
        """The tenant of team ``name``'s refits (:func:`_team_tenant`)."""
        raw = self.r.hget(TEAMS, name)
        return _team_tenant(name, json.loads(raw) if raw else {})

    def team_has(self, team: str, campaign_id: str) -> bool:
        return bool(self.r.sismember(self.team_key(team), campaign_id))

    def ids(self, team: str | None = None) -> list[str]:
        """Every campaign's id, in order; with ``team``, that team's only."""
        members = self.r.smembers(CAMPAIGNS if team is None else self.team_key(team))
        return sorted(i.decode() for i in members)

    def ids_page(self, cursor: str | None, limit: int | None,
                 team: str | None = None) -> tuple[list[str], str | None]:  # fmt: skip
        """The campaign ids (with ``team``, that team's only) after ``cursor`` (an id; None:
        from the first), in order, at most ``limit`` of them (None: all), and the cursor of the
        next page (None: this is the last). Only the page's campaigns are read further by the
        callers."""
        ids = self.ids(team)
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

    def wanting_workers(self, now: float) -> set[str]:
        """The campaigns that hold or will soon want a worker: a refit queued or running, or a
        ticket out (its label brings a refit). One pipelined read per campaign: the chains'
        fan-out asks it only when a worker is idle."""
        ids = self.ids()
        pipe = self.r.pipeline(transaction=False)
        for campaign_id in ids:
            pipe.hget(self.k(campaign_id, "state"), "refit")
            pipe.zcount(self.k(campaign_id, "leases"), now, "+inf")
        answers = pipe.execute()
        return {
            campaign_id
            for campaign_id, refit, out in zip(ids, answers[::2], answers[1::2], strict=True)
            if refit in (b"queued", b"running") or out
        }

    def spec(self, campaign_id: str) -> dict:
        raw = self.r.get(self.k(campaign_id, "spec"))
        if raw is None:
            raise NotFound(f"no campaign {campaign_id!r}")
        return json.loads(raw)

    def points(self, campaign_id: str, spec: dict) -> np.ndarray | None:
        """An explicit pool's points (``m x d`` codes, :meth:`worker.space.Space.codes`: for
        float inputs, their values); None for a grid or a pool kept in the spec itself (as
        campaigns created before the points were kept apart)."""
        if not pools.explicit(spec) or "points" in spec["pool"]:
            return None
        raw = self.r.get(self.k(campaign_id, "points"))
        if raw is None:
            raise NotFound(f"no campaign {campaign_id!r}")
        return np.frombuffer(raw, dtype=ROW_TYPE).reshape(-1, len(spec["inputs"]))

    def pool(self, campaign_id: str, spec: dict):
        """The campaign's pool in the unit cube (:func:`service.pool.pool_of`)."""
        return pools.pool_of(spec, self.points(campaign_id, spec))

    def pool_points(self, campaign_id: str, spec: dict, indices: list[int]) -> list[list]:
        """Pool points ``indices`` as values: of an explicit pool, their stored rows (one
        ``GETRANGE`` each, in one round trip, whatever the pool's size), exactly as posted."""
        if not pools.explicit(spec):  # the grid built once for all of them
            return pools.to_original(spec, pools.pool_of(spec).points(indices))
        if "points" in spec["pool"]:
            return [[float(v) for v in spec["pool"]["points"][i]] for i in indices]
        width = ROW_TYPE.itemsize * len(spec["inputs"])
        pipe = self.r.pipeline(transaction=False)
        for i in indices:
            pipe.getrange(self.k(campaign_id, "points"), i * width, (i + 1) * width - 1)
        rows = pipe.execute()
        if any(len(raw) != width for raw in rows):
            raise NotFound(f"no campaign {campaign_id!r}")
        codes = np.array([np.frombuffer(raw, dtype=ROW_TYPE) for raw in rows])
        return pools.space_of(spec).values(codes.reshape(len(rows), len(spec["inputs"])))

    def delete(self, campaign_id: str) -> None:
        """All the campaign's keys, its id and its token, at once (:data:`DELETE_SCRIPT`);
        then its jobs are stopped (running) or canceled (queued)."""
        spec = self.spec(campaign_id)
        part = functools.partial(self.k, campaign_id)
        keys = [part("spec"), part("labels"), part("token"), CAMPAIGNS, TOKENS, PHASES,
                part("state"), part("jobs"), self.team_key(spec.get("team") or "")]  # fmt: skip
        args = [campaign_id, spec["initial_design"]["size"], spec["max_labels"]]
        found, *jobs = self._delete(keys=keys + [part(p) for p in PARTS], args=args)
        if not found:
            raise NotFound(f"no campaign {campaign_id!r}")
        self.wake(campaign_id)
        queues.stop_jobs(self.r, [j.decode().partition(":")[2] for j in jobs])

    def state(self, campaign_id: str) -> dict:
        raw = self.r.hgetall(self.k(campaign_id, "state"))
        return {k.decode(): v.decode() for k, v in raw.items()}

    def n_labeled(self, campaign_id: str) -> int:
        return int(self.r.llen(self.k(campaign_id, "labels")))

    def status(self, campaign_id: str, now: float | None = None) -> dict:
        spec = self.spec(campaign_id)
        now = time.time() if now is None else now
        rules = Rules.of(spec)
        state = self.state(campaign_id)
        refit = Refit.of(state)
        n = self.n_labeled(campaign_id)
        pending = int(self.r.zcount(self.k(campaign_id, "leases"), now, "+inf"))
        n_failed = self.n_failed(campaign_id, state)
        # only runs that failed can stall a campaign: the whole snapshot is read only then
        stalled = n_failed > 0 and loop.stalled(rules, self.snapshot(campaign_id, now, False))
        return {
            "id": campaign_id, "name": spec["name"], "team": spec.get("team"),
            "state": str(loop.phase(rules, n, bool(refit.failed), bool(refit.stopped))),
            "n_labeled": n, "n_pending": pending, "max_labels": spec["max_labels"],
            "model_version": refit.model_version, "last_error": refit.last_error,
            "refit_failures": refit.failures, "refit_retry_at": refit.retry_at or None,
            "refit": str(refit.phase), "acquisition": spec["acquisition"], "mode": spec["mode"],
            "inputs": spec["inputs"], "n_failed": n_failed, "n_abandoned": refit.n_abandoned,
            "n_forgiven": refit.n_forgiven, "max_failures": rules.failure_limit,
            "failing": loop.failing(rules, n_failed, refit.n_forgiven),
            "stalled": stalled,
            "stopped_by": json.loads(refit.stopped) if refit.stopped else None,
        }  # fmt: skip

    # -- labels ------------------------------------------------------------------------------
    def labels(self, campaign_id: str) -> list[dict]:
        return [json.loads(v) for v in self.r.lrange(self.k(campaign_id, "labels"), 0, -1)]

    def record_label(
        self, campaign_id: str, ticket: str, y: float, now: float, noise: float | None = None
    ) -> tuple[LabelOutcome, int, bool]:
        """Store the label of ``ticket`` (:func:`service.loop.label_outcome`, atomically):
        ``(outcome, n_labeled, enqueue_refit)``. ``noise``: its known noise variance, kept in
        the record (and in the ticket's state, for a repeat to match)."""
        spec = self.spec(campaign_id)
        raw = self.r.hget(self.k(campaign_id, "tickets"), ticket)
        if raw is None:
            return LabelOutcome.UNKNOWN_TICKET, self.n_labeled(campaign_id), False
        info = json.loads(raw)
        fields = {"x": info["x"], "y": y, "index": info["index"], "ticket": ticket}
        if noise is not None:
            fields["noise"] = noise
        record = json.dumps(fields)
        index = "" if info["index"] is None else str(info["index"])
        keys = [self.k(campaign_id, p) for p in
                ("tickets", "ticket_state", "leases", "labels", "labeled", "state")]  # fmt: skip
        keys += [PHASES, self.k(campaign_id, "expired")]
        repeats = "1" if spec["allow_repeats"] else "0"
        state = loop.labeled_state(y, noise).removeprefix("labeled:")
        args = [ticket, state, record, index, spec["max_labels"], repeats,
                spec["initial_design"]["size"], now]  # fmt: skip
        outcome, n, enqueue = self._label(keys=keys, args=args)
        self.wake(campaign_id)
        return LabelOutcome(outcome.decode()), int(n), bool(enqueue)

    def imported(self, campaign_id: str, key: str, digest: str) -> tuple[ImportOutcome, int,
                                                                         int] | None:  # fmt: skip
        """What became of the import with Idempotency-Key ``key``: None if none was stored;
        else ``(SAME_AGAIN, n_labeled after it, its count)``, or ``KEY_REUSED`` if it had other
        observations than those of SHA-256 ``digest``."""
        held = self.r.hget(self.k(campaign_id, "imports"), key)
        return None if held is None else _held_import(held, digest)

    def import_observations(
        self, campaign_id: str, x: list, y: list, now: float, noise: list | None = None,
        key: str | None = None, digest: str = "",
    ) -> tuple[ImportOutcome, int, bool]:  # fmt: skip
        """Store imported observations, all or none (:func:`service.loop.import_outcome`):
        ``(outcome, n_labeled, enqueue_refit)``; ``noise``: their known noise variances. With
        an Idempotency-Key ``key`` (and the SHA-256 ``digest`` of the observations), an import
        whose key was stored before is :meth:`imported`'s answer instead, nothing stored."""
        spec = self.spec(campaign_id)
        n = self.n_labeled(campaign_id)
        if n + len(x) > spec["max_labels"]:  # before the look-up (the script checks again)
            return ImportOutcome.TOO_MANY, n, False
        index = pools.pool_index_of(spec, self.pool(campaign_id, spec), x)
        args: list = [len(x), spec["max_labels"], spec["initial_design"]["size"]]
        noises = [None] * len(y) if noise is None else noise
        for xi, yi, ii, ni in zip(x, y, index, noises, strict=True):
            record = {"x": xi, "y": yi, "index": ii, "ticket": None}
            if ni is not None:
                record["noise"] = ni
            args += [json.dumps(record), "" if ii is None else str(ii)]
        args += [now, "1" if spec["allow_repeats"] else "0", key or "", digest]
        keys = [self.k(campaign_id, p) for p in ("labels", "labeled", "state")] + [PHASES]
        keys += [self.k(campaign_id, "spec"), self.k(campaign_id, "imports")]
        outcome, n, enqueue, *held = self._import(keys=keys, args=args)
        if outcome == b"gone":
            raise NotFound(f"no campaign {campaign_id!r}")
        if outcome == b"held":  # the same key, stored between imported() and here
            return _held_import(held[0], digest)[:2] + (False,)
        self.wake(campaign_id)
        return ImportOutcome(outcome.decode()), int(n), bool(enqueue)

    def count_labels(self, count: int) -> None:
        """Add stored labels to the shared metric."""
        record_labels(self.r, count)

    # -- failed, abandoned and renewed runs -----------------------------------------------------
    def failures(self, campaign_id: str, last: int | None = None) -> list[dict]:
        """The failed runs kept (the latest ``keep_runs``), oldest first; with ``last``, only
        the last ``last`` of them."""
        start = 0 if last is None else -last
        return [json.loads(v) for v in self.r.lrange(self.k(campaign_id, "failures"), start, -1)]

    def n_failed(self, campaign_id: str, state: dict | None = None) -> int:
        """The campaign's failed runs, all counted (``state``: its state hash, if read)."""
        state = self.state(campaign_id) if state is None else state
        if "n_failed" in state:
            return int(state["n_failed"])
        return int(self.r.llen(self.k(campaign_id, "failures")))  # stored before the count

    def run_events(self, campaign_id: str) -> list[dict]:
        """The failed and abandoned runs kept, as ``/history`` events, oldest first (each kind
        the latest ``keep_runs``)."""
        pipe = self.r.pipeline(transaction=True)
        pipe.lrange(self.k(campaign_id, "failures"), 0, -1)
        pipe.lrange(self.k(campaign_id, "abandons"), 0, -1)
        failures, abandons = pipe.execute()
        events = [dict(json.loads(v), event="run_failed") for v in failures]
        events += [json.loads(v) for v in abandons]
        return sorted(events, key=lambda e: e["at"])

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
            return RunOutcome.UNKNOWN_TICKET, self.n_failed(campaign_id), False
        reason = reason[:MAX_REASON]
        record = {"x": info["x"], "index": info["index"], "ticket": ticket, "reason": reason,
                  "at": now}  # fmt: skip
        keys = [self.k(campaign_id, p) for p in ("ticket_state", "leases", "failures", "failed",
                                                 "state", "expired", "labels")]  # fmt: skip
        index = "" if info["index"] is None else str(info["index"])
        args = [ticket, loop.failed_state(reason), json.dumps(record), index,
                spec["initial_design"]["size"], now, get_settings().keep_runs,
                reason]  # fmt: skip
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
                ("ticket_state", "leases", "state", "abandons", "labels", "expired")]  # fmt: skip
        args = [ticket, spec["initial_design"]["size"], now, json.dumps(event),
                get_settings().keep_runs]  # fmt: skip
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
        args: list = []
        out = []
        for index, x, version in offers:
            ticket = uuid.uuid4().hex
            info = {"x": x, "index": index, "issued_at": now, "expires_at": now + lease,
                    "model_version": version}  # fmt: skip
            args += [ticket, json.dumps(info), now + lease]
            out.append({"ticket": ticket, "x": x, "expires_at": now + lease,
                        "model_version": version})  # fmt: skip
        keys = [self.k(campaign_id, p) for p in ("spec", "tickets", "ticket_state", "leases")]
        if args and not self._issue(keys=keys, args=args):  # deleted meanwhile: nothing written
            raise NotFound(f"no campaign {campaign_id!r}")
        return out

    def replay(self, campaign_id: str, key: str, now: float) -> dict | None:
        """The ticket that answered the ``/next`` with Idempotency-Key ``key``, as ``/next``
        answers it (with its lease as renewed), while it is out; None otherwise."""
        found = self._replay(keys=self._request_keys(campaign_id), args=[key, now])
        return None if found is None else _ticket_answer(found)

    def claim(self, campaign_id: str, key: str, ticket: dict, now: float) -> dict:
        """Bind Idempotency-Key ``key`` to ``ticket`` (an answer of :meth:`issue`), and return
        the ticket the key answers: ``ticket``, or one issued for the same key before and still
        out, in which case ``ticket`` is withdrawn (:data:`CLAIM_SCRIPT`)."""
        keys = self._request_keys(campaign_id) + [self.k(campaign_id, "spec")]
        found = self._claim(keys=keys, args=[key, ticket["ticket"], now])
        if found is None:
            raise NotFound(f"no campaign {campaign_id!r}")
        winner = _ticket_answer(found)
        if winner["ticket"] != ticket["ticket"]:
            self.withdraw(campaign_id, [ticket["ticket"]])
        return winner

    def _request_keys(self, campaign_id: str) -> list[str]:
        return [self.k(campaign_id, p) for p in ("requests", "ticket_state", "leases", "tickets")]

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
            self._expire_tickets(campaign_id, now, pipe)
        pipe.zrangebyscore(leases, now, "+inf")
        pipe.llen(self.k(campaign_id, "labels"))
        pipe.smembers(self.k(campaign_id, "labeled"))
        pipe.hgetall(self.k(campaign_id, "state"))
        pipe.get(self.k(campaign_id, "ranking"))
        pipe.hgetall(self.k(campaign_id, "failed"))
        pipe.llen(self.k(campaign_id, "failures"))
        *_, tickets, n, labeled, state, ranking, failed, kept = pipe.execute()
        infos = self.r.hmget(self.k(campaign_id, "tickets"), tickets) if tickets else []
        state = {k.decode(): v.decode() for k, v in state.items()}
        state.setdefault("n_failed", str(kept))  # stored before the count: its list counts
        return Snapshot(
            n_labeled=int(n),
            n_pending=len(tickets),
            pending=frozenset(json.loads(i)["index"] for i in infos if i is not None) - {None},
            labeled=frozenset(int(i) for i in labeled),
            refit=Refit.of(state),
            ranking=tuple(p["index"] for p in json.loads(ranking)) if ranking else (),
            failures={int(i): int(c) for i, c in failed.items()},
        )

    def _expire_tickets(self, campaign_id: str, now: float, client=None) -> int:
        """Expired leases leave ``leases`` for ``expired``; tickets expired more than
        ``expired_ticket_seconds`` ago and still unlabeled are pruned (:data:`EXPIRE_SCRIPT`)."""
        keep = get_settings().expired_ticket_seconds
        keys = [self.k(campaign_id, p) for p in ("leases", "expired", "tickets", "ticket_state")]
        return self._expire(keys=keys, args=[now, now - keep, EXPIRED_PRUNE_BATCH], client=client)

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
        if "accuracy" in model:
            event["accuracy"] = model["accuracy"]
        keys = [self.k(campaign_id, p) for p in ("state", "history", "model", "ranking")]
        keys += [self.k(campaign_id, "labels"), PHASES]
        args = [token, model["version"], json.dumps(event), json.dumps(model), json.dumps(ranking),
                d.get("refit_seconds", 0.0)]  # fmt: skip
        args += self._stop_args(campaign_id, event)
        outcome = self._save_model(keys=keys, args=args)
        if outcome == 2:
            log.info("campaign stopped by its rule: %s", args[6], extra={"campaign": campaign_id})
        if outcome >= 1:
            self.wake(campaign_id)
        return outcome >= 1

    def _stop_args(self, campaign_id: str, event: dict) -> list:
        """SAVE_MODEL_SCRIPT's stop (its verdict, its history event, the design's size and
        max_labels) if the campaign's stopping rule is met once model ``event`` is in its
        history (:func:`service.loop.stop_verdict`); blanks if not. The rule and the history
        read here cannot change before the script runs unless the campaign is stopped (only a
        resume changes them), and then the script does not stop it again."""
        try:
            spec = self.spec(campaign_id)
        except NotFound:
            return ["", "", 0, 0]  # deleted meanwhile: the script finds no refit in charge
        if not spec.get("stop"):
            return ["", "", 0, 0]
        history = [*self.history(campaign_id), event]
        verdict = loop.stop_verdict(spec["stop"], history, spec["initial_design"]["size"],
                                    STOP_TARGETS)  # fmt: skip
        if verdict is None or verdict["version"] != event["version"]:
            return ["", "", 0, 0]
        verdict["at"] = event["at"]
        stopped = dict(verdict, event="stopped", n_labeled=event["version"])
        return [json.dumps(verdict), json.dumps(stopped), spec["initial_design"]["size"],
                spec["max_labels"]]  # fmt: skip

    def model(self, campaign_id: str) -> dict:
        raw = self.r.get(self.k(campaign_id, "model"))
        if raw is None:
            self.spec(campaign_id)
            raise NotFound(f"campaign {campaign_id!r} has no model yet")
        return json.loads(raw)

    def ranking(self, campaign_id: str) -> list[dict]:
        raw = self.r.get(self.k(campaign_id, "ranking"))
        return [] if raw is None else json.loads(raw)

    def enqueue_refit(self, campaign_id: str) -> str | None:
        """Put a refit on the queue and put it in charge (the state says ``queued`` already).
        Its job id is written first, so the job finds itself in charge when it starts; nothing
        is written or enqueued if the campaign was deleted or failed meanwhile (None)."""
        job_id = uuid.uuid4().hex
        try:
            spec = self.spec(campaign_id)
        except NotFound:
            return None
        now = time.time()
        timeout, queue = self._refit_job(campaign_id, spec)
        keys = [self.k(campaign_id, p) for p in ("spec", "state", "jobs")]
        if not self._enqueue(keys=keys, args=[job_id, f"refit:{job_id}", now + timeout, now]):
            return None
        queues.enqueue_refit(self.r, campaign_id, job_id, timeout, queue)
        return job_id

    def _refit_job(self, campaign_id: str, spec: dict) -> tuple[int, str]:
        """A refit job's timeout and queue (:func:`service.queues.refit_queue`)."""
        settings = get_settings()
        n = self.n_labeled(campaign_id)
        took = self.r.hmget(self.k(campaign_id, "state"), "last_refit_seconds",
                            "failed_refit_seconds")  # fmt: skip
        known = [float(t) for t in took if t and float(t) > 0]
        last_seconds = max(known) if known else None
        timeout = queues.refit_timeout(spec, n, settings)
        return timeout, queues.refit_queue(spec, n, last_seconds, settings)

    def _refit_queued(self, campaign_id: str, job_id: str, now: float) -> None:
        """Enqueue refit ``job_id``, which a script has put in charge of a queued refit."""
        try:
            spec = self.spec(campaign_id)
        except NotFound:
            return
        timeout, queue = self._refit_job(campaign_id, spec)
        if self.track_jobs(campaign_id, [f"refit:{job_id}"], now, now + timeout):
            queues.enqueue_refit(self.r, campaign_id, job_id, timeout, queue)

    def track_jobs(self, campaign_id: str, members: list[str], now: float, until: float) -> bool:
        """Note jobs (``refit:<id>``, ``short:<id>``) among the campaign's, for a delete or a
        failure to stop, until ``until``; False if the campaign is gone (noted nowhere)."""
        keys = [self.k(campaign_id, "spec"), self.k(campaign_id, "jobs")]
        return bool(self._track(keys=keys, args=[now, until, *members]))

    def admit_short(self, campaign_id: str, member: str, now: float, until: float,
                    most: int) -> int:  # fmt: skip
        """Note model call ``member`` among the campaign's jobs until ``until`` unless ``most``
        are out already: 1 noted, 0 the campaign is gone, -1 too many out."""
        keys = [self.k(campaign_id, "spec"), self.k(campaign_id, "jobs")]
        return int(self._admit_short(keys=keys, args=[now, until, member, most]))

    def forget_jobs(self, campaign_id: str, members: list[str]) -> None:
        """Jobs that ended, no longer the campaign's to stop or count."""
        self.r.zrem(self.k(campaign_id, "jobs"), *members)

    def stop_refits(self, campaign_id: str, but: str | None = None) -> None:
        """Stop the campaign's refit jobs (refits, chain groups, merges) but ``but``: those
        running are killed, those queued canceled."""
        members = self.r.zrange(self.k(campaign_id, "jobs"), 0, -1)
        ids = [m.decode().partition(":")[2] for m in members if m.startswith(b"refit:")]
        queues.stop_jobs(self.r, [i for i in ids if i != but])

    def _failure_params(self, campaign_id: str, job_id: str, now: float, reason: str,
                        died: bool) -> str:  # fmt: skip
        """AFTER_FAILURE's ``p``, as JSON."""
        spec, settings = self.spec(campaign_id), get_settings()
        return json.dumps({
            "job": job_id, "now": now, "attempts": settings.refit_max_attempts,
            "base": settings.refit_backoff_seconds, "cap": settings.refit_backoff_max_seconds,
            "died": died,
            "reason": reason[:MAX_REASON], "design_size": spec["initial_design"]["size"],
            "max_labels": spec["max_labels"],
        })  # fmt: skip

    def _after_failure(self, campaign_id: str, outcome: int, job_id: str, now: float,
                       but: str | None = None) -> None:  # fmt: skip
        """Act on AFTER_FAILURE's outcome: enqueue the new job (1), or stop the campaign's
        other refit jobs once it failed (3)."""
        if outcome == 1:
            self._refit_queued(campaign_id, job_id, now)
        elif outcome == 3:
            log.error("campaign failed: %s", self.state(campaign_id).get("failed"),
                      extra={"campaign": campaign_id})  # fmt: skip
            self.stop_refits(campaign_id, but)
        self.wake(campaign_id)

    def _adopt_refit(self, campaign_id: str, old: str, now: float) -> bool:
        """Enqueue a queued refit whose job ``old`` ('' for none) never reached RQ under a new
        job (a new id, so that a late push of the old one cannot run a job twice)."""
        job_id = uuid.uuid4().hex
        if not self._adopt(keys=[self.k(campaign_id, "state")], args=[job_id, now, old]):
            return False
        log.warning("a queued refit's job never reached RQ (whoever was to enqueue it stopped "
                    "first): enqueued now", extra={"campaign": campaign_id})  # fmt: skip
        self._refit_queued(campaign_id, job_id, now)
        self.wake(campaign_id)
        return True

    def note_merge(self, campaign_id: str, token: str, merge_id: str) -> bool:
        """Note ``merge_id`` as the job that merges refit ``token``'s chain groups (while it waits
        or runs, the silent refit is alive); False when another refit is in charge."""
        keys = [self.k(campaign_id, "state")]
        return bool(self._note_merge(keys=keys, args=[token, merge_id]))

    def revive_refit(self, campaign_id: str, now: float, lease: float) -> bool:
        """Enqueue the campaign's refit again if it is dead (:func:`service.loop.refit_dead`, with
        RQ's facts about its job looked up only for a suspect), or if its back-off ran out
        (:func:`service.loop.retry_due`); the old job, should it still run somewhere, is no
        longer in charge and cannot write. A death counts as a failure of the refit: from the
        second in a row on it backs off, and at ``refit_max_attempts`` in a row the campaign
        fails. A refit queued whose enqueue never came (:func:`service.loop.refit_unenqueued`:
        the API or worker that queued it stopped in between) is enqueued and counts as
        nothing. True if this call acted (one caller wins when several look at once)."""
        refit = Refit.of(self.state(campaign_id))
        if loop.retry_due(refit, now):
            job_id = uuid.uuid4().hex
            if not self._retry_due(keys=[self.k(campaign_id, "state")], args=[job_id, now]):
                return False
            self._after_failure(campaign_id, 1, job_id, now)
            return True
        if not loop.refit_suspect(refit, now, lease):
            return False
        facts = queues.job_facts(self.r, refit.job, refit.merge)
        if loop.refit_unenqueued(refit, now, facts):
            return self._adopt_refit(campaign_id, refit.job, now)
        if not loop.refit_dead(refit, now, lease, facts):
            return False
        job_id = uuid.uuid4().hex
        attempts = get_settings().refit_max_attempts
        reason = f"the refit failed {attempts} times in a row; the last time: {DIED}"
        keys = [self.k(campaign_id, p) for p in ("state", "labels")] + [PHASES]
        keys.append(self.k(campaign_id, "history"))
        try:
            params = self._failure_params(campaign_id, job_id, now, reason, died=True)
        except NotFound:
            return False  # deleted meanwhile
        event = {"event": "refit_failed", "n_labeled": self.n_labeled(campaign_id), "at": now,
                 "error": DIED}  # fmt: skip
        args = [refit.job, params, json.dumps(event)]
        outcome = self._revive(keys=keys, args=args)
        if not outcome:
            return False
        self._after_failure(campaign_id, outcome, job_id, now)
        return True

    def revive_all(self, now: float, lease: float) -> list[str]:
        """:meth:`revive_refit` for every campaign (and its expired tickets pruned): the ids
        revived."""
        revived = []
        for campaign_id in self.ids():
            with contextlib.suppress(NotFound):
                self._expire_tickets(campaign_id, now)
                if self.revive_refit(campaign_id, now, lease):
                    revived.append(campaign_id)
        return revived

    def retry(self, campaign_id: str, now: float) -> bool:
        """The owner's retry (:data:`RETRY_SCRIPT`): a failed campaign's failed state cleared;
        a failing or stalled one's failed runs forgiven, their points offered again; then a
        refit enqueued where one is due. False if there was nothing to retry."""
        spec = self.spec(campaign_id)
        rules = Rules.of(spec)
        job_id = uuid.uuid4().hex
        stalled = loop.stalled(rules, self.snapshot(campaign_id, now, False))
        keys = [self.k(campaign_id, p) for p in ("state", "labels")] + [PHASES]
        keys += [self.k(campaign_id, p) for p in ("failed", "failures")]
        args = [job_id, now, spec["initial_design"]["size"], spec["max_labels"],
                rules.failure_limit, "1" if stalled else "0"]  # fmt: skip
        outcome = self._retry(keys=keys, args=args)
        if outcome == 2:
            self._refit_queued(campaign_id, job_id, now)
        self.wake(campaign_id)
        return bool(outcome)

    def beat(self, campaign_id: str, token: str, now: float, start: bool = False) -> bool:
        """The heartbeat of refit ``token`` (``start``: it begins now); False when another
        refit is in charge."""
        keys = [self.k(campaign_id, "state")]
        return bool(self._beat(keys=keys, args=[token, now, "1" if start else "0"]))

    def refit_failed(self, campaign_id: str, message: str, n_seen: int, token: str,
                     current: str | None = None) -> bool:  # fmt: skip
        """Record why refit ``token`` failed (if it is in charge; False if not); the model
        stays. The refit runs again after a back-off (:func:`service.loop.backoff`; sooner when
        new data comes), and at ``refit_max_attempts`` failures in a row the campaign fails."""
        now = time.time()
        event = {"event": "refit_failed", "n_labeled": n_seen, "at": now,
                 "error": message[:2000]}  # fmt: skip
        job_id = uuid.uuid4().hex
        attempts = get_settings().refit_max_attempts
        reason = f"the refit failed {attempts} times in a row; the last time: {message}"
        keys = [self.k(campaign_id, p) for p in ("state", "labels")] + [PHASES]
        keys.append(self.k(campaign_id, "history"))
        try:
            params = self._failure_params(campaign_id, job_id, now, reason, died=False)
        except NotFound:
            return False  # deleted meanwhile
        args = [token, message[:2000], json.dumps(event), params]
        outcome = self._fail(keys=keys, args=args)
        if outcome:  # the job reporting (``current``) is not stopped: it ends by itself
            self._after_failure(campaign_id, outcome, job_id, now, but=current or token)
        else:
            self.wake(campaign_id)
        return bool(outcome)

    def resume(self, campaign_id: str, stop: dict | None = None, replace: bool = False) -> bool:
        """The owner's resume of a campaign its stopping rule stopped: it goes on, the rule's
        patience counted again from the next model; with ``replace``, under rule ``stop``
        (None: none). False if it was not stopped."""
        for _ in range(10):
            raw = self.r.get(self.k(campaign_id, "spec"))
            if raw is None:
                raise NotFound(f"no campaign {campaign_id!r}")
            spec = json.loads(raw)
            new = json.dumps(dict(spec, stop=stop)) if replace else ""
            event = {"event": "resumed", "at": time.time(),
                     "n_labeled": self.n_labeled(campaign_id),
                     "stop": stop if replace else spec.get("stop")}  # fmt: skip
            keys = [self.k(campaign_id, p) for p in ("state", "labels")] + [PHASES]
            keys += [self.k(campaign_id, "history"), self.k(campaign_id, "spec")]
            args = [json.dumps(event), spec["initial_design"]["size"], spec["max_labels"], raw,
                    new]  # fmt: skip
            outcome = int(self._resume(keys=keys, args=args))
            if outcome >= 0:
                self.wake(campaign_id)
                return bool(outcome)
        raise RuntimeError("the campaign's spec kept changing during its resume")

    def record_evaluation(self, campaign_id: str, version: int, metrics: dict) -> None:
        event = {"event": "evaluate", "version": version, "n_labeled": version, "at": time.time()}
        kept = ("nlml", "rmse", "nlpd_mixture", "nlml_paper")
        if "outputs" in metrics:  # several outputs: each one's, and their mean in GP units
            event["outputs"] = {name: {k: m[k] for k in kept if k in m}
                                for name, m in metrics["outputs"].items()}  # fmt: skip
            for k in ("nlml", "nlpd_mixture", "nlml_paper"):
                values = [m[k] for m in event["outputs"].values() if k in m]
                if len(values) == len(event["outputs"]):
                    event[k] = sum(values) / len(values)
        else:
            event.update({k: metrics[k] for k in kept if k in metrics})
        keys = [self.k(campaign_id, "spec"), self.k(campaign_id, "history")]
        self._write_if_campaign(keys=keys, args=["RPUSH", json.dumps(event)])

    # -- the pages' pictures ------------------------------------------------------------------
    @staticmethod
    def stamp(model_version: int | None, n_labeled: int, n_history: int) -> str:
        """What a campaign's pictures are drawn from, as one word: its model, its labels and its
        history's events (a model's accuracy, an evaluation, a failed run)."""
        return f"{model_version}-{n_labeled}-{n_history}"

    def plot_stamp(self, campaign_id: str) -> tuple[int | None, str]:
        """The campaign's model version and :meth:`stamp` now."""
        pipe = self.r.pipeline(transaction=True)
        pipe.hget(self.k(campaign_id, "state"), "model_version")
        pipe.llen(self.k(campaign_id, "labels"))
        pipe.llen(self.k(campaign_id, "history"))
        version, n, events = pipe.execute()
        version = int(version) if version else None
        return version, self.stamp(version, int(n), int(events))

    def cached_plot(self, campaign_id: str, name: str, stamp: str) -> bytes | None:
        """The picture ``name`` drawn at ``stamp``, if it is kept."""
        kept = self.r.hget(self.k(campaign_id, "plots"), name)
        if kept is None:
            return None
        drawn, _, png = kept.partition(b"\n")
        return png if drawn.decode() == stamp else None

    def keep_plot(self, campaign_id: str, name: str, stamp: str, png: bytes) -> None:
        """Keep the picture ``name`` drawn at ``stamp`` (in place of an older one), unless the
        campaign was deleted meanwhile."""
        keys = [self.k(campaign_id, "spec"), self.k(campaign_id, "plots")]
        self._write_if_campaign(keys=keys, args=["HSET", name, stamp.encode() + b"\n" + png])

    def history(self, campaign_id: str) -> list[dict]:
        """The models, evaluations, failed refits, stops and resumes, oldest first (what the
        stopping rule and the pictures read; :meth:`events` adds the runs)."""
        self.spec(campaign_id)
        return [json.loads(v) for v in self.r.lrange(self.k(campaign_id, "history"), 0, -1)]

    def events(self, campaign_id: str) -> list[dict]:
        """``/history``: :meth:`history` and the runs kept (:meth:`run_events`), by time. A
        store from before the runs had lists of their own holds its failed runs in both: the
        history's copies are left out."""
        history = [e for e in self.history(campaign_id) if e.get("event") != "run_failed"]
        return sorted(history + self.run_events(campaign_id), key=lambda e: e.get("at", 0.0))

    def end_refit(self, campaign_id: str, n_seen: int, now: float, token: str) -> bool:
        """True when another refit must run (labels came in meanwhile)."""
        keys = [self.k(campaign_id, "state"), self.k(campaign_id, "labels")]
        again = bool(self._end_refit(keys=keys, args=[n_seen, now, token]))
        self.wake(campaign_id)
        return again
