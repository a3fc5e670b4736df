-- A run-once's begin (after fenced/check.lua), in one step: raises the resource's fence floor to
-- this run's fence and reads the record (a key of the wrong type is refused before anything is
-- written). A run before it that was paused past its lease and
-- records later is refused (its fence is below the floor); one that recorded before is found.
--
-- KEYS[1]: the resource's fence key; KEYS[2]: the record.
-- ARGV[1]: this run's fence.
-- Replies: {1, fence} not done; {1, fence, record} done; {-1, KEYS[2], found} the record's key
-- holds something else (and check.lua's: {0, accepted} a newer fence was accepted).

local record = redis.pcall('get', KEYS[2])
if type(record) == 'table' then
  return {-1, KEYS[2], redis.call('type', KEYS[2]).ok}
end
redis.call('set', KEYS[1], ARGV[1])
if record then
  return {1, ARGV[1], record}
end
return {1, ARGV[1]}
