-- Release the fair lock if this owner holds it, and/or take the caller out of the queue (a waiter
-- that gives up). When the lock or the head of the queue changed, wakes the waiter now at the
-- head (the only one that may take the lock) by its token, or every waiter if none is queued.
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
-- A queue key of another type is not ours: leave it (the acquire reports it).
local rank = redis.pcall('zrank', KEYS[3], ARGV[1])
local was_head = rank == 0
if type(rank) == 'number' then
  redis.call('zrem', KEYS[3], ARGV[1])
  redis.pcall('zrem', KEYS[4], ARGV[1])
end
if released == 1 or was_head then
  local head = nil
  local alive = redis.call('type', KEYS[4]).ok
  if redis.call('type', KEYS[3]).ok == 'zset' and (alive == 'zset' or alive == 'none') then
    drop_lapsed(KEYS[3], KEYS[4], now_ms())
    head = live_head(KEYS[3], KEYS[4], nil)
  end
  if head then
    redis.call('publish', ARGV[2], WAKE_TO .. head)
  else
    redis.call('publish', ARGV[2], WAKE_ALL)
  end
end
return released
