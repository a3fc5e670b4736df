-- A run-once's record (after fenced/check.lua): the work is done, written only if this run's
-- fence is still the newest the resource accepted (a run paused past its lease is refused), as
-- `<fence>:<ms>` with the server's clock in milliseconds.
--
-- KEYS[1]: the resource's fence key; KEYS[2]: the record.
-- ARGV[1]: this run's fence.
-- Replies: {1, fence} recorded (and check.lua's: {0, accepted} a newer fence was accepted).

redis.call('set', KEYS[1], ARGV[1])
redis.call('set', KEYS[2], ARGV[1] .. ':' .. string.sub(clock_text(), 1, -4))
return {1, ARGV[1]}
