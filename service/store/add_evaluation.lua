-- Appends evaluation ARGV[1] to the campaign's evaluations (KEYS[2]), of which the latest ARGV[2]
-- stay, if the campaign (KEYS[1]: spec) still exists, so that a write that races its delete
-- leaves no key behind. Returns 1 if written.
-- needs: keep_event
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
keep_event(KEYS[2], ARGV[1], ARGV[2])
return 1
