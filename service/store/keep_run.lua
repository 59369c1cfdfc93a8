-- Shared by the scripts that end a ticket's run without a label (a failure, an abandon): the
-- run's record appended to a list that keeps the latest ARGV keep (all are counted elsewhere),
-- and the ticket handed to the pruning of expired ones (expire.lua), so that a simulator that
-- keeps failing or giving points back costs a bounded amount of memory.
local function keep_run(list_key, record, keep, expired_key, now, ticket)
  redis.call('RPUSH', list_key, record)
  redis.call('LTRIM', list_key, -tonumber(keep), -1)
  redis.call('ZADD', expired_key, now, ticket)
end
