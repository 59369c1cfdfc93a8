-- Shared by the scripts that end a refit that failed (an error, or its job died): its failures
-- in a row counted; at p.attempts the campaign fails (3: no refit in charge, counted as failed,
-- p.reason recorded); else it is queued under job p.job at once (1: the first death in a row) or
-- left to its back-off (2: idle until retry_at, rules.backoff). keys: state, labels, PHASES,
-- history; p: job, now, attempts, base, cap, died, reason, design_size, max_labels, keep (the
-- history events kept, keep_event.lua).
-- needs: count_phases keep_event
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
    keep_event(keys[4], cjson.encode({event = 'failed', at = p.now, reason = p.reason,
                                      n_labeled = n}), p.keep)
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
