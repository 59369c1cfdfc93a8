-- The ticket that answered the Idempotency-Key ARGV[1], if it is still out (else nil).
-- KEYS as live_ticket.lua's; ARGV: key, now.
-- needs: live_ticket
local ticket = redis.call('HGET', KEYS[1], ARGV[1])
if live(ticket, tonumber(ARGV[2])) then return answer(ticket) end
return nil
