-- Shared by the scripts that add to a campaign's history or its evaluations: the event appended
-- to the list, of which the latest keep stay (settings.keep_history, keep_evaluations), so that a
-- campaign's events cost a bounded amount of memory however often they come.
local function keep_event(list_key, event, keep)
  redis.call('RPUSH', list_key, event)
  redis.call('LTRIM', list_key, -tonumber(keep), -1)
end
