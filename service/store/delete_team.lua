-- Deletes team ARGV[1]'s token; the team's record goes too unless it still holds campaigns
-- (then it stays, deleted, so that its name is not made anew by mistake). KEYS: TEAMS,
-- TEAM_DIGESTS, TOKENS, the team's set. 1 if it was a live team, 0 if not.
local old = redis.call('HGET', KEYS[2], ARGV[1])
if not old then return 0 end
redis.call('HDEL', KEYS[3], old)
redis.call('HDEL', KEYS[2], ARGV[1])
if redis.call('SCARD', KEYS[4]) == 0 then redis.call('HDEL', KEYS[1], ARGV[1]) end
return 1
