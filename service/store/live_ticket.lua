-- Shared by the scripts that answer a /next sent again with its Idempotency-Key: whether a
-- ticket is out (pending, its lease not run out at ARGV now), and its answer {ticket, info,
-- expiry}. KEYS: requests, ticket_state, leases, tickets.
local function live(ticket, now)
  if not ticket or redis.call('HGET', KEYS[2], ticket) ~= 'pending' then return false end
  local expiry = redis.call('ZSCORE', KEYS[3], ticket)
  return expiry and tonumber(expiry) >= now
end
local function answer(ticket)
  return {ticket, redis.call('HGET', KEYS[4], ticket), redis.call('ZSCORE', KEYS[3], ticket)}
end
