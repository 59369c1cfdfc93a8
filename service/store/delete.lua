-- Deletes campaign ARGV[1], all or nothing: its keys (KEYS[10..]), its id from the index and
-- from its team's set, its tokens, and its count in its phase. KEYS: spec, labels, token, the
-- index, the tokens, PHASES, state, jobs, its team's set (one that never exists when it has no
-- team: no team is named ''), then every part; ARGV: id, design size, max_labels. Returns {0}
-- if it was gone already, else {1, its jobs...} (for the caller to stop).
-- needs: count_phases
if redis.call('EXISTS', KEYS[1]) == 0 then return {0} end
local n = redis.call('LLEN', KEYS[2])
local digest = redis.call('GET', KEYS[3])
add_phase(KEYS[6], phase(n, ARGV[2], ARGV[3], has_failed(KEYS[7]), is_stopped(KEYS[7])), -1)
local out = {1}
for _, job in ipairs(redis.call('ZRANGE', KEYS[8], 0, -1)) do out[#out + 1] = job end
for i = 10, #KEYS do redis.call('UNLINK', KEYS[i]) end
redis.call('SREM', KEYS[4], ARGV[1])
redis.call('SREM', KEYS[9], ARGV[1])
if digest then
  for d in string.gmatch(digest, '%S+') do redis.call('HDEL', KEYS[5], d) end
end
return out
