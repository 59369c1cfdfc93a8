-- Shared by the scripts that end a ticket (a label, a failure, an abandon): what its state says
-- before it ends (nil: it is pending, go on; else the outcome, 'same_again' when it ended the way
-- asked already), and its end: its state set and its lease gone.
local function ended(ticket_state_key, ticket, wanted)
  local state = redis.call('HGET', ticket_state_key, ticket)
  if not state then return 'unknown_ticket' end
  if state == 'pending' then return nil end
  if state == wanted then return 'same_again' end
  return 'conflict'
end
local function end_ticket(ticket_state_key, leases_key, ticket, new_state)
  redis.call('HSET', ticket_state_key, ticket, new_state)
  redis.call('ZREM', leases_key, ticket)
end
