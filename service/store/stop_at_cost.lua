-- Stops a campaign whose labels' cost reached its max_cost, with the verdict ARGV[1]: unless it
-- is gone, has failed, stopped already, or has max_labels labels, its state's ``stopped`` is set,
-- its history gets the event ARGV[2] and its count by phase moves to done. 1 stopped, 0 not.
-- KEYS: state, history, labels, PHASES, spec; ARGV[3], ARGV[4]: design size, max_labels;
-- ARGV[5]: the history events kept (keep_event.lua).
-- needs: count_phases keep_event
if redis.call('EXISTS', KEYS[5]) == 0 then return 0 end
if has_failed(KEYS[1]) or is_stopped(KEYS[1]) then return 0 end
local n = redis.call('LLEN', KEYS[3])
if n >= tonumber(ARGV[4]) then return 0 end
add_phase(KEYS[4], phase(n, ARGV[3], ARGV[4]), -1)
add_phase(KEYS[4], 'done', 1)
redis.call('HSET', KEYS[1], 'stopped', ARGV[1])
keep_event(KEYS[2], ARGV[2], ARGV[5])
return 1
