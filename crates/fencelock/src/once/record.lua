-- A run-once's record (after fenced/check.lua): the work is done, written only if this run's
-- fence is still the newest the resource accepted (a run paused past its lease is refused), as
-- `<fence>:<ms>` with the server's clock in milliseconds; the count of failed runs before it
-- goes.
--
-- KEYS[1]: the resource's fence key; KEYS[2]: the record; KEYS[3]: its failed runs.
-- ARGV[1]: this run's fence; ARGV[2]: how long the record is kept, in milliseconds (0: for ever).
-- Replies: {1, fence} recorded (and check.lua's: {0, accepted} a newer fence was accepted).

redis.call('set', KEYS[1], ARGV[1])
local record = ARGV[1] .. ':' .. string.sub(clock_text(), 1, -4)
if ARGV[2] == '0' then
  redis.call('set', KEYS[2], record)
else
  redis.call('set', KEYS[2], record, 'px', ARGV[2])
end
redis.call('del', KEYS[3])
return {1, ARGV[1]}
