-- Release the fair lock if this owner holds it, and/or take the caller out of the queue (a waiter
-- that gives up). Wakes every waiter when the lock or the head of the queue changed: only Redis
-- knows which waiter is next.
-- KEYS[1] the lock key, KEYS[2] the fence key, KEYS[3] the queue, KEYS[4] the liveness set
-- ARGV[1] the owner token, ARGV[2] the release channel, ARGV[3] the fence (or '')
-- Reply: 1 the lock was released, 0 it was not held by this owner
local released = 0
local value = redis.pcall('get', KEYS[1])
if fence_if_held(value, ARGV[1]) then
  raise_fence(KEYS[2], ARGV[3])
  redis.call('del', KEYS[1])
  released = 1
end
local was_head = false
if redis.call('type', KEYS[3]).ok == 'zset' then
  was_head = redis.call('zrank', KEYS[3], ARGV[1]) == 0
  redis.call('zrem', KEYS[3], ARGV[1])
end
if redis.call('type', KEYS[4]).ok == 'zset' then
  redis.call('zrem', KEYS[4], ARGV[1])
end
if released == 1 or was_head then
  redis.call('publish', ARGV[2], 'all')
end
return released
