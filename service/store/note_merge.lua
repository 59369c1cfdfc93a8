-- Notes job ARGV[2] as the merge of refit ARGV[1]'s chain groups, if that refit is still in charge
-- (loop.JobFacts.merging). KEYS: state. 1 if so.
if redis.call('HGET', KEYS[1], 'refit_job') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'refit_merge', ARGV[2])
return 1
