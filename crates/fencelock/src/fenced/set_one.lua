
-- A fenced write of one SET (after check.lua), the most common fenced write: write.lua's
-- result without decoding generic writes (a SET takes any type, so there is nothing to check).
--
-- KEYS[1]: the resource's fence key; KEYS[2]: the key to set.
-- ARGV[1]: the writer's fence; ARGV[2]: the value.
-- Replies: {1, fence} applied (and check.lua's).

redis.call('set', KEYS[1], ARGV[1])
redis.call('set', KEYS[2], ARGV[2])
return {1, ARGV[1]}
