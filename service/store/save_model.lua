-- Stores the model of refit ARGV[1] if it is still in charge and the model is not older than
-- the stored one: 1 stored, 0 older, -1 not in charge (or the campaign is gone).
-- With a stopping rule's verdict ARGV[7] (stopping.stop_verdict met by this model; '' if none), the
-- campaign stops in the same step, so that no /next sees the model without the stop: unless it
-- has failed, stopped already, or has max_labels labels, its state's ``stopped`` is set, its
-- history gets the event ARGV[8] and its count by phase moves to done (2: stored and stopped).
-- KEYS: state, history, model, ranking, labels, PHASES; ARGV[9], ARGV[10]: design size,
-- max_labels; ARGV[11]: the history events kept (keep_event.lua).
-- needs: stop_campaign
if redis.call('HGET', KEYS[1], 'refit_job') ~= ARGV[1] then return -1 end
local current = redis.call('HGET', KEYS[1], 'model_version')
if current and tonumber(current) > tonumber(ARGV[2]) then return 0 end
keep_event(KEYS[2], ARGV[3], ARGV[11])
redis.call('SET', KEYS[3], ARGV[4])
redis.call('SET', KEYS[4], ARGV[5])
redis.call('HSET', KEYS[1], 'model_version', ARGV[2], 'last_error', '',
           'last_refit_seconds', ARGV[6], 'refit_failures', 0, 'retry_at', 0,
           'failed_refit_seconds', 0)
if (ARGV[7] or '') == '' then return 1 end
if stop_campaign(KEYS[1], KEYS[2], KEYS[5], KEYS[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10],
                 ARGV[11]) then return 2 end
return 1
