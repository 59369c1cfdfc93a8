-- Gives team ARGV[1] the token whose SHA-256 is ARGV[2]. With ARGV[4] 'create', a new team
-- (its record ARGV[3], with the tenant of its refits added: of 1 .. ARGV[5] - 1, the one the
-- fewest teams have, the lowest of those; service.queues.TENANTS): 0 if the name is a live
-- team's, -1 if it is a deleted team's that still holds campaigns (a rotation makes that one
-- live again), else 1. With 'rotate', in place of its token (the old one gone from the tokens at
-- once), a deleted team live again: 0 if there is no such team, else 1. KEYS: TEAMS,
-- TEAM_DIGESTS, TOKENS, the team's set.
local known = redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1
local old = redis.call('HGET', KEYS[2], ARGV[1])
if ARGV[4] == 'create' then
  if old then return 0 end
  if known and redis.call('SCARD', KEYS[4]) > 0 then return -1 end
  local held = {}
  for _, raw in ipairs(redis.call('HVALS', KEYS[1])) do
    local t = cjson.decode(raw)['tenant']
    if t then held[t] = (held[t] or 0) + 1 end
  end
  local tenant, fewest = 1, nil
  for t = 1, tonumber(ARGV[5]) - 1 do
    if fewest == nil or (held[t] or 0) < fewest then tenant, fewest = t, held[t] or 0 end
  end
  local record = cjson.decode(ARGV[3])
  record['tenant'] = tenant
  redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(record))
else
  if not known then return 0 end
  if old then redis.call('HDEL', KEYS[3], old) end
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[3], ARGV[2], 'team:' .. ARGV[1])
return 1
