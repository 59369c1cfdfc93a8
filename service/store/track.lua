-- Notes jobs ARGV[3..] (members ``refit:<id>`` or ``short:<id>``) among the campaign's jobs
-- (KEYS[2]) until ARGV[2], and forgets those whose time ran out before ARGV[1]. KEYS: spec, jobs.
-- 0 (nothing written) if the campaign is gone.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[1])
for i = 3, #ARGV do redis.call('ZADD', KEYS[2], ARGV[2], ARGV[i]) end
return 1
