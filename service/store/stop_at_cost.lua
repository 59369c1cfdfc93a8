-- Stops a campaign whose labels' cost reached its max_cost, with the verdict ARGV[1]: unless it
-- is gone (stop_campaign.lua says when else it does not), its state's ``stopped`` is set,
-- its history gets the event ARGV[2] and its count by phase moves to done. 1 stopped, 0 not.
-- KEYS: state, history, labels, PHASES, spec; ARGV[3], ARGV[4]: design size, max_labels;
-- ARGV[5]: the history events kept (keep_event.lua).
-- needs: stop_campaign
if redis.call('EXISTS', KEYS[5]) == 0 then return 0 end
if stop_campaign(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3], ARGV[4],
                 ARGV[5]) then return 1 end
return 0
