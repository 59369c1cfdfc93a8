-- Ends a pending ticket's run as failed (rules.fail_outcome): its lease ends, the failure is
-- kept (keep_run.lua) and counted (``n_failed``; a store from before the count counts its list),
-- its point's count of failures goes up, and once the design is labeled a refit is requested
-- (rules.refit_due) so that the ranking leaves the point out if it failed for good.
-- KEYS: ticket_state, leases, failures, failed, state, expired, labels; ARGV: ticket,
-- loop.failed_state, record, index, design size, now, keep, the reason. Returns {outcome, n_failed,
-- enqueue_refit}, the outcome a loop.RunOutcome value.
-- needs: request_refit end_ticket keep_run
local failed = tonumber(redis.call('HGET', KEYS[5], 'n_failed') or redis.call('LLEN', KEYS[3]))
local outcome = ended(KEYS[1], ARGV[1], ARGV[2])
if outcome == 'conflict' and redis.call('HGET', KEYS[1], ARGV[1]) == 'failed:' .. ARGV[8] then
  outcome = 'same_again'  -- it failed before states held a digest, for the same reason
end
if outcome then return {outcome, failed, 0} end
end_ticket(KEYS[1], KEYS[2], ARGV[1], ARGV[2])
keep_run(KEYS[3], ARGV[3], ARGV[7], KEYS[6], ARGV[6], ARGV[1])
if ARGV[4] ~= '' then redis.call('HINCRBY', KEYS[4], ARGV[4], 1) end
redis.call('HINCRBY', KEYS[5], 'changes', 1)
redis.call('HSET', KEYS[5], 'n_failed', failed + 1)
local n = redis.call('LLEN', KEYS[7])
return {'stored', failed + 1, request_refit(KEYS[5], n, ARGV[5], ARGV[6])}
