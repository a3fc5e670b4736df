-- A run-once's failed run (after fenced/check.lua): counted only if this run's fence is still
-- the newest the resource accepted (a run paused past its lease, whose lock another run has
-- taken since, is not counted). The count lives as long as the record would.
--
-- KEYS[1]: the resource's fence key; KEYS[2]: the record's failed runs (a count).
-- ARGV[1]: this run's fence; ARGV[2]: how long the count is kept, in milliseconds (0: for ever).
-- Replies: {1, fence, failures} counted; {-1, key, found} the count's key holds something else
-- (and check.lua's: {0, accepted} a newer fence was accepted).

local found = redis.call('type', KEYS[2]).ok
if found ~= 'none' and found ~= 'string' then
  return {-1, KEYS[2], found}
end
local failures = redis.pcall('incr', KEYS[2])
if type(failures) == 'table' then
  return {-1, KEYS[2], 'a string that is not a count'}
end
redis.call('set', KEYS[1], ARGV[1])
if ARGV[2] ~= '0' then
  redis.call('pexpire', KEYS[2], ARGV[2])
end
return {1, ARGV[1], failures}
