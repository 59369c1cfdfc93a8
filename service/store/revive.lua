-- Ends refit ARGV[1] (found dead) if it is still in charge (after_failure.lua: 1 queued again under
-- a new job, 2 backing off, 3 the campaign failed); 0 if another call did it first.
-- KEYS: state, labels, PHASES, history; ARGV: the dead job, the JSON of after_failure.lua's p, the
-- history event.
-- needs: after_failure
if redis.call('HGET', KEYS[1], 'refit_job') ~= ARGV[1] then return 0 end
local p = cjson.decode(ARGV[2])
keep_event(KEYS[4], ARGV[3], p.keep)
return after_failure(KEYS, p)
