-- Records the failure of refit ARGV[1] (its error ARGV[2], its history event ARGV[3]) if it is
-- still in charge, and what comes next (after_failure.lua: 1, 2 or 3); 0 if it is not in charge.
-- KEYS: state, labels, PHASES, history; ARGV[4]: the JSON of after_failure.lua's p.
-- needs: after_failure
if redis.call('HGET', KEYS[1], 'refit_job') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'last_error', ARGV[2])
local p = cjson.decode(ARGV[4])
keep_event(KEYS[4], ARGV[3], p.keep)
return after_failure(KEYS, p)
