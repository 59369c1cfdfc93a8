-- Shared by the scripts that add labels (rules.refit_due): once the design is labeled, mark a refit
-- queued with no job in charge (1: the caller enqueues it, enqueue.lua; should the caller stop
-- first, loop.refit_unenqueued). If one is queued or running already, nothing: when it ends it
-- sees whether labels arrived after it read them, and runs once more if so (end_refit.lua).
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
