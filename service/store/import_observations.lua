-- Appends imported observations if they fit under max_labels and, without repeats, none is a pool
-- point labeled already or twice among them. KEYS: labels, labeled, state,
-- PHASES, spec, imports. Returns {outcome, n, enqueue}, the outcome a loop.ImportOutcome value,
-- or 'gone' (the campaign was deleted meanwhile: nothing written), or {'held', 0, 0, record}
-- when its Idempotency-Key ARGV[6 + 2 count] was stored before (record: "digest n count"); a
-- stored import's key is kept with the digest ARGV[7 + 2 count] of its observations.
-- Its rule in Python: rules.import_outcome.
-- needs: request_refit count_phases
if redis.call('EXISTS', KEYS[5]) == 0 then return {'gone', 0, 0} end
local n = redis.call('LLEN', KEYS[1])
local count = tonumber(ARGV[1])
local key, digest = ARGV[6 + 2 * count], ARGV[7 + 2 * count]
if key ~= '' then
  local held = redis.call('HGET', KEYS[6], key)
  if held then return {'held', 0, 0, held} end
end
if n + count > tonumber(ARGV[2]) then return {'too_many', n, 0} end
if ARGV[5 + 2 * count] == '0' then
  local seen = {}
  for i = 1, count do
    local index = ARGV[5 + 2 * (i - 1)]
    if index ~= '' then
      if seen[index] or redis.call('SISMEMBER', KEYS[2], index) == 1 then
        return {'repeated', n, 0}
      end
      seen[index] = true
    end
  end
end
for i = 1, count do
  redis.call('RPUSH', KEYS[1], ARGV[4 + 2 * (i - 1)])
  local index = ARGV[5 + 2 * (i - 1)]
  if index ~= '' then redis.call('SADD', KEYS[2], index) end
end
move_phase(KEYS[4], n, n + count, ARGV[3], ARGV[2], KEYS[3])
n = n + count
if key ~= '' then redis.call('HSET', KEYS[6], key, digest .. ' ' .. n .. ' ' .. count) end
return {'stored', n, request_refit(KEYS[3], n, ARGV[3], ARGV[4 + 2 * count])}
