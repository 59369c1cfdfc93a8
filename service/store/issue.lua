-- Issues tickets if the campaign still exists: per ticket ARGV[i..i+2] (id, JSON, expiry).
-- KEYS: spec, tickets, ticket_state, leases. 0 (nothing written) if the campaign is gone.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
for i = 1, #ARGV, 3 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  redis.call('HSET', KEYS[3], ARGV[i], 'pending')
  redis.call('ZADD', KEYS[4], ARGV[i + 2], ARGV[i])
end
return 1
