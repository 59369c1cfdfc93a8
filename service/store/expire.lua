-- Moves the tickets whose lease ran out before ARGV[1] from the leases (KEYS[1]) to the expired
-- ones (KEYS[2], by expiry; their points are offered again; a run that failed or was abandoned,
-- or a ticket superseded, joins them by when it ended), and prunes up to ARGV[3] of those that
-- expired or ended before ARGV[2], then, while more than ARGV[4] are left, up to ARGV[3] of the
-- oldest: unless labeled, from the tickets (KEYS[3]) and their states (KEYS[4]), so that a late
-- label or report for one is an unknown ticket (a labeled one stays, so that its label sent
-- again is still recognized; labels are bounded by max_labels). Returns how many left the
-- expired set.
-- Its rule in Python: rules.expire_tickets.
local out = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'WITHSCORES')
for i = 1, #out, 2 do redis.call('ZADD', KEYS[2], out[i + 1], out[i]) end
if #out > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1]) end
local batch = tonumber(ARGV[3])
local function prune(tickets)
  for _, ticket in ipairs(tickets) do
    local state = redis.call('HGET', KEYS[4], ticket)
    if state and string.sub(state, 1, 8) ~= 'labeled:' then
      redis.call('HDEL', KEYS[3], ticket)
      redis.call('HDEL', KEYS[4], ticket)
    end
    redis.call('ZREM', KEYS[2], ticket)
  end
  return #tickets
end
local n = prune(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[2], 'LIMIT', 0, batch))
local over = math.min(redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[4]), batch)
if over > 0 then n = n + prune(redis.call('ZRANGE', KEYS[2], 0, over - 1)) end
return n
