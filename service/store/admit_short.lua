-- Notes model call ARGV[3] (``short:<id>``) among the campaign's jobs (KEYS[2]) until ARGV[2]
-- unless ARGV[4] such calls are out already (their time not run out before ARGV[1]). KEYS: spec,
-- jobs. 1: noted; 0: the campaign is gone; -1: too many out.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[1])
local out = 0
for _, member in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  if string.sub(member, 1, 6) == 'short:' then out = out + 1 end
end
if out >= tonumber(ARGV[4]) then return -1 end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
return 1
