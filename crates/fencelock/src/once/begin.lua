-- A run-once's begin (after fenced/check.lua), in one step: raises the resource's fence floor to
-- this run's fence and reads the record (a key of the wrong type is refused before anything is
-- written). A run before it that was paused past its lease and records later is refused (its
-- fence is below the floor); one that recorded before is found. With a limit on failed runs,
-- the record's failures are read too: once as many runs failed, nothing runs any more.
--
-- KEYS[1]: the resource's fence key; KEYS[2]: the record; KEYS[3]: its failed runs (a count).
-- ARGV[1]: this run's fence; ARGV[2]: how many runs may fail (0: any number).
-- Replies: {1, fence} not done; {1, fence, record} done; {1, fence, '', failures} not done, and
-- ARGV[2] runs failed; {-1, key, found} the record's (or the count's) key holds something else
-- (and check.lua's: {0, accepted} a newer fence was accepted).

local record = redis.pcall('get', KEYS[2])
if type(record) == 'table' then
  return {-1, KEYS[2], redis.call('type', KEYS[2]).ok}
end
local failures = false
if ARGV[2] ~= '0' then
  failures = redis.pcall('get', KEYS[3])
  if type(failures) == 'table' then
    return {-1, KEYS[3], redis.call('type', KEYS[3]).ok}
  end
end
redis.call('set', KEYS[1], ARGV[1])
if record then
  return {1, ARGV[1], record}
end
if failures and (tonumber(failures) or 0) >= tonumber(ARGV[2]) then
  return {1, ARGV[1], '', failures}
end
return {1, ARGV[1]}
