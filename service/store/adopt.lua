-- Puts job ARGV[1] in charge of a refit that was queued but whose job ARGV[3] ('' for none) never
-- reached RQ (loop.refit_unenqueued), from ARGV[2] on. KEYS: state. 1 if this call did it (one
-- caller wins when several look at once).
local s = redis.call('HMGET', KEYS[1], 'refit', 'refit_job', 'failed')
if s[1] ~= 'queued' or (s[2] or '') ~= ARGV[3] or (s[3] or '') ~= '' then return 0 end
redis.call('HSET', KEYS[1], 'refit_job', ARGV[1], 'queued_at', ARGV[2])
return 1
