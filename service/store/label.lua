-- Checks and records a label for a ticket, atomically (rules.label_outcome). Returns
-- {outcome, n_labeled, enqueue_refit}, the outcome a loop.LabelOutcome value.
-- needs: request_refit count_phases end_ticket
local n = redis.call('LLEN', KEYS[4])
local outcome = ended(KEYS[2], ARGV[1], 'labeled:' .. ARGV[2])
if outcome then return {outcome, n, 0} end
if ARGV[4] ~= '' and ARGV[6] == '0' and redis.call('SISMEMBER', KEYS[5], ARGV[4]) == 1 then
  end_ticket(KEYS[2], KEYS[3], ARGV[1], 'superseded')  -- it can never be labeled
  redis.call('ZADD', KEYS[8], ARGV[8], ARGV[1])  -- pruned as an expired one is
  return {'conflict', n, 0}
end
if n >= tonumber(ARGV[5]) then return {'done', n, 0} end
end_ticket(KEYS[2], KEYS[3], ARGV[1], 'labeled:' .. ARGV[2])
redis.call('RPUSH', KEYS[4], ARGV[3])
if ARGV[4] ~= '' then redis.call('SADD', KEYS[5], ARGV[4]) end
move_phase(KEYS[7], n, n + 1, ARGV[7], ARGV[5], KEYS[6])
n = n + 1
return {'stored', n, request_refit(KEYS[6], n, ARGV[7], ARGV[8])}
