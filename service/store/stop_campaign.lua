-- Shared by the scripts that stop a campaign (a stopping rule's verdict, a budget in cost):
-- unless it has failed, stopped already, or has max_labels labels, its state's ``stopped`` is
-- set to the verdict, its history gets the event and its count by phase moves to done. true
-- when it stopped.
-- needs: count_phases keep_event
local function stop_campaign(state, history, labels, phases, verdict, event, design, max_labels,
                             keep)
  if has_failed(state) or is_stopped(state) then return false end
  local n = redis.call('LLEN', labels)
  if n >= tonumber(max_labels) then return false end
  add_phase(phases, phase(n, design, max_labels), -1)
  add_phase(phases, 'done', 1)
  redis.call('HSET', state, 'stopped', verdict)
  keep_event(history, event, keep)
  return true
end
