-- Refreshes the heartbeat of refit ARGV[1] (and marks it running if ARGV[3] is 1), if it is still
-- the one in charge; a start notes the failures and abandons it sees. Returns 1 if so.
if redis.call('HGET', KEYS[1], 'refit_job') ~= ARGV[1] then return 0 end
if ARGV[3] == '1' then
  local changes = redis.call('HGET', KEYS[1], 'changes') or '0'
  redis.call('HSET', KEYS[1], 'refit', 'running', 'started_at', ARGV[2], 'changes_seen', changes,
             'refit_merge', '')
end
redis.call('HSET', KEYS[1], 'heartbeat', ARGV[2])
return 1
