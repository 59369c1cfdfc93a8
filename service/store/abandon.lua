-- Abandons a pending ticket (rules.abandon_outcome): its lease ends, its point is free again,
-- the abandon is kept (keep_run.lua) and counted; once the design is labeled a refit is requested
-- (the ranking takes the point back). KEYS: ticket_state, leases, state, abandons, labels,
-- expired; ARGV: ticket, design size, now, record, keep. Returns {outcome, n_abandoned,
-- enqueue_refit}.
-- needs: request_refit end_ticket keep_run
local abandoned = tonumber(redis.call('HGET', KEYS[3], 'n_abandoned') or '0')
local outcome = ended(KEYS[1], ARGV[1], 'abandoned')
if outcome then return {outcome, abandoned, 0} end
end_ticket(KEYS[1], KEYS[2], ARGV[1], 'abandoned')
redis.call('HINCRBY', KEYS[3], 'changes', 1)
abandoned = redis.call('HINCRBY', KEYS[3], 'n_abandoned', 1)
keep_run(KEYS[4], ARGV[4], ARGV[5], KEYS[6], ARGV[3], ARGV[1])
local n = redis.call('LLEN', KEYS[5])
return {'stored', abandoned, request_refit(KEYS[3], n, ARGV[2], ARGV[3])}
