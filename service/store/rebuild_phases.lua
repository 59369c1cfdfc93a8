-- Counts every campaign by phase into PHASES (KEYS[1]) from the index (KEYS[2]), each campaign's
-- spec and labels read under the prefix ARGV[1], in one step; returns nothing.
-- needs: count_phases
local counts = {design = 0, active = 0, done = 0, failed = 0}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  local raw = redis.call('GET', ARGV[1] .. id .. ':spec')
  if raw then
    local spec = cjson.decode(raw)
    local n = redis.call('LLEN', ARGV[1] .. id .. ':labels')
    local state = ARGV[1] .. id .. ':state'
    local name = phase(n, spec['initial_design']['size'], spec['max_labels'], has_failed(state),
                       is_stopped(state))
    counts[name] = counts[name] + 1
  end
end
redis.call('HSET', KEYS[1], 'design', counts.design, 'active', counts.active, 'done', counts.done,
           'failed', counts.failed)
