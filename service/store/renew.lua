-- Extends a live lease to ARGV[3] (rules.renew_outcome). KEYS: ticket_state, leases; ARGV:
-- ticket, now, new expiry. Returns {outcome, expires_at}.
local state = redis.call('HGET', KEYS[1], ARGV[1])
if not state then return {'unknown_ticket', ''} end
if state ~= 'pending' then return {'ended', ''} end
local expiry = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not expiry or tonumber(expiry) < tonumber(ARGV[2]) then return {'expired', expiry or ''} end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return {'renewed', ARGV[3]}
