-- Ends the refit ARGV[3] that saw ARGV[1] labels: 1 if another one must run (more labels came,
-- or runs failed or were abandoned since it started: rules.refit_again; it is queued with no job
-- in charge until the caller's enqueue), else 0 (also when that refit is no longer in charge).
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
