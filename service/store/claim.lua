-- Binds the Idempotency-Key ARGV[1] to the ticket ARGV[2] just issued for it, unless the key
-- answers another ticket still out (the same request, sent again while the first was waiting:
-- that ticket wins, the caller withdraws its own). Returns the winner's answer, or nil if the
-- campaign is gone. Once the hash holds more than twice the tickets out (and 64), the keys
-- whose tickets are no longer out are dropped: amortized, a claim costs O(1). KEYS: requests,
-- ticket_state, leases, tickets, spec; ARGV: key, ticket, now.
-- Its rule in Python: rules.claim_key.
-- needs: live_ticket
if redis.call('EXISTS', KEYS[5]) == 0 then return nil end
local now = tonumber(ARGV[3])
local held = redis.call('HGET', KEYS[1], ARGV[1])
if held and held ~= ARGV[2] and live(held, now) then return answer(held) end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if redis.call('HLEN', KEYS[1]) > 2 * redis.call('ZCARD', KEYS[3]) + 64 then
  local entries = redis.call('HGETALL', KEYS[1])
  for i = 1, #entries, 2 do
    if not live(entries[i + 1], now) then redis.call('HDEL', KEYS[1], entries[i]) end
  end
end
return answer(ARGV[2])
