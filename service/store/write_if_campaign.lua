-- Writes to KEYS[2] if the campaign (KEYS[1]: spec) still exists, so that a write that races its
-- delete leaves no key behind: the command ARGV[1] (RPUSH, HSET) with the arguments after it.
-- Returns 1 if written.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call(ARGV[1], KEYS[2], unpack(ARGV, 2))
return 1
