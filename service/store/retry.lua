-- The owner's retry of a campaign that cannot go on by itself. A failed one (its refits failed
-- too often in a row): its failed state and count cleared, counted in its phase again. A failing
-- one (more failed runs since the last retry than ARGV[5], loop.failing), or one that stalled
-- (ARGV[6] = '1', loop.stalled): its failed runs are forgiven, n_forgiven = n_failed (they count
-- no more towards failing), and its points' counts of failures dropped, so every point failed
-- for good is offered again. Then, once its design is labeled, a refit is queued under job
-- ARGV[1] (a failed one's), or requested (the ranking must take the forgiven points back).
-- ARGV[7] = '1' (forget_failures: the simulator changed) on a campaign with a failed run: its
-- failed runs are forgiven as above, and the failure model forgets them too (failures_forgotten_at
-- = now: a refit's failure model counts only the runs failed after it).
-- KEYS: state, labels, PHASES, failed, failures; ARGV: job, now, design size, max_labels,
-- failure limit, stalled, forget. 0: nothing to retry; 1: cleared; 2: cleared and a refit queued.
-- Its rule in Python: rules.retry_outcome.
-- needs: count_phases request_refit
local refit_failed = has_failed(KEYS[1])
local s = redis.call('HMGET', KEYS[1], 'n_failed', 'n_forgiven')
local n_failed = tonumber(s[1] or redis.call('LLEN', KEYS[5]))
local failing = n_failed - tonumber(s[2] or '0') > tonumber(ARGV[5])
local forget = ARGV[7] == '1' and n_failed > 0
local forgive = failing or ARGV[6] == '1' or forget
if not refit_failed and not forgive then return 0 end
local n = redis.call('LLEN', KEYS[2])
if forgive then
  redis.call('DEL', KEYS[4])
  redis.call('HSET', KEYS[1], 'n_failed', n_failed, 'n_forgiven', n_failed)
  redis.call('HINCRBY', KEYS[1], 'changes', 1)
end
if forget then redis.call('HSET', KEYS[1], 'failures_forgotten_at', ARGV[2]) end
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
