-- Shared by the scripts that create and delete campaigns or add labels: the count of campaigns by
-- phase (loop.phase) in PHASES, kept as labels move a campaign on, so that /metrics reads three
-- numbers instead of every campaign's status. PHASES is exact whenever it exists: it is made by
-- rebuild_phases.lua (one atomic count of every campaign), and nothing adds to it while it is absent.
-- Its rule in Python: rules.phase_moves; phase: loop.phase.
local function phase(n, design_size, max_labels, failed, stopped)
  if failed then return 'failed' end
  if n >= tonumber(max_labels) or stopped then return 'done' end
  if n < tonumber(design_size) then return 'design' end
  return 'active'
end
local function add_phase(phases_key, name, count)
  if redis.call('EXISTS', phases_key) == 1 then redis.call('HINCRBY', phases_key, name, count) end
end
local function has_failed(state_key)
  return (redis.call('HGET', state_key, 'failed') or '') ~= ''
end
local function is_stopped(state_key)
  return (redis.call('HGET', state_key, 'stopped') or '') ~= ''
end
local function move_phase(phases_key, before, after, design_size, max_labels, state_key)
  local failed, stopped = has_failed(state_key), is_stopped(state_key)
  local from = phase(before, design_size, max_labels, failed, stopped)
  local to = phase(after, design_size, max_labels, failed, stopped)
  if from ~= to then
    add_phase(phases_key, from, -1)
    add_phase(phases_key, to, 1)
  end
end
