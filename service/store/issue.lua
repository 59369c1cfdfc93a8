-- Issues tickets if the campaign still exists: per ticket ARGV[i..i+3] (id, JSON, expiry, the
-- key of its point off the pool or ''), the keys of points off the pool added to `offered`.
-- KEYS: spec, tickets, ticket_state, leases, offered. 0 (nothing written) if the campaign is gone.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
for i = 1, #ARGV, 4 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  redis.call('HSET', KEYS[3], ARGV[i], 'pending')
  redis.call('ZADD', KEYS[4], ARGV[i + 2], ARGV[i])
  if ARGV[i + 3] ~= '' then redis.call('SADD', KEYS[5], ARGV[i + 3]) end
end
return 1
