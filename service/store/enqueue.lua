-- Puts job ARGV[1] in charge of the campaign's queued refit from now (its grace for the enqueue,
-- loop.ENQUEUE_GRACE_SECONDS, starts again) and notes it among its jobs (TRACK).
-- KEYS: spec, state, jobs; ARGV: job, member, forget at, now. 0 (nothing written) if the campaign
-- is gone, failed, or has no refit queued.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local s = redis.call('HMGET', KEYS[2], 'refit', 'failed')
if s[1] ~= 'queued' or (s[2] or '') ~= '' then return 0 end
redis.call('HSET', KEYS[2], 'refit_job', ARGV[1], 'queued_at', ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[4])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[2])
return 1
