-- The owner's resume of a campaign its stopping rule stopped: the stop cleared, counted in its
-- phase again, the event ARGV[1] in its history; with ARGV[5] (a new spec: its rule replaced)
-- the spec set to it if it is still ARGV[4]. KEYS: state, labels, PHASES, history, spec; ARGV:
-- event, design size, max_labels, old spec, new spec or '', the history events kept
-- (keep_event.lua). 1 resumed, 0 not stopped, -1 the spec changed meanwhile.
-- needs: count_phases keep_event
if not is_stopped(KEYS[1]) then return 0 end
if ARGV[5] ~= '' then
  if redis.call('GET', KEYS[5]) ~= ARGV[4] then return -1 end
  redis.call('SET', KEYS[5], ARGV[5])
end
local n = redis.call('LLEN', KEYS[2])
local failed = has_failed(KEYS[1])
add_phase(KEYS[3], phase(n, ARGV[2], ARGV[3], failed, true), -1)
add_phase(KEYS[3], phase(n, ARGV[2], ARGV[3], failed, false), 1)
redis.call('HSET', KEYS[1], 'stopped', '')
keep_event(KEYS[4], ARGV[1], ARGV[6])
return 1
