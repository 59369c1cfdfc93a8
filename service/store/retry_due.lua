-- Queues a failed refit whose back-off ran out (loop.retry_due) under job ARGV[1]. KEYS: state;
-- ARGV: job, now. 1 if so.
local s = redis.call('HMGET', KEYS[1], 'refit', 'failed', 'retry_at')
if s[1] ~= 'idle' or (s[2] or '') ~= '' then return 0 end
local at = tonumber(s[3]) or 0
if at <= 0 or at > tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], 'refit', 'queued', 'queued_at', ARGV[2], 'refit_job', ARGV[1],
           'retry_at', 0)
return 1
