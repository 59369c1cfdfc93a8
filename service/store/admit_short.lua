-- Notes model call ARGV[3] (``short:<id>``) among the campaign's jobs (KEYS[2]) and, unless
-- ARGV[5] is empty (a plot), the stack's (KEYS[3]) until ARGV[2], unless ARGV[4] such calls of
-- the campaign are out already, or ARGV[5] of the whole stack (their time not run out before
-- ARGV[1]). KEYS: spec, jobs, shorts. 1: noted; 0: the campaign is gone; -1: too many of the
-- campaign's out; -2: the stack's share of its workers for model calls is taken.
-- Its rule in Python: rules.admit_short.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[1])
local out = 0
for _, member in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  if string.sub(member, 1, 6) == 'short:' then out = out + 1 end
end
if out >= tonumber(ARGV[4]) then return -1 end
local stack = ARGV[5] ~= ''
if stack and redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[5]) then return -2 end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
if stack then redis.call('ZADD', KEYS[3], ARGV[2], ARGV[3]) end
return 1
