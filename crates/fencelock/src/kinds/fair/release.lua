-- Release the fair lock if this owner holds it, and/or take the caller out of the queue (a waiter
-- that gives up). When the lock or the head of the queue changed, wakes the waiter now at the
-- head (the only one that may take the lock) by its token, or every waiter if none is queued.
-- KEYS[1] the lock key, KEYS[2] the fence key, KEYS[3] the queue, KEYS[4] the liveness set
-- ARGV[1] the owner token, ARGV[2] the release channel, ARGV[3] the fence (or '')
-- Reply: 1 the lock was released, 0 it was not held by this owner
local value = redis.pcall('get', KEYS[1])
local held = fence_if_held(value, ARGV[1]) ~= nil
-- A queue key of another type is not ours: leave it (the acquire reports it).
local rank = redis.pcall('zrank', KEYS[3], ARGV[1])
local queued = type(rank) == 'number'
local changed = held or rank == 0
local alive_type = redis.call('type', KEYS[4]).ok
local queues_ok = redis.call('type', KEYS[3]).ok == 'zset'
  and (alive_type == 'zset' or alive_type == 'none')
local now = now_ms()
-- Reads above, the message next, the writes last (see the prelude).
if changed then
  local head = nil
  if queues_ok then
    head = next_head(KEYS[3], KEYS[4], ARGV[1], now)
  end
  if head then
    publish(ARGV[2], WAKE_TO .. head)
  else
    publish(ARGV[2], WAKE_ALL)
  end
end
if held then
  raise_fence(KEYS[2], ARGV[3])
  redis.call('del', KEYS[1])
end
if queued then
  redis.call('zrem', KEYS[3], ARGV[1])
  redis.pcall('zrem', KEYS[4], ARGV[1])
end
if changed and queues_ok then
  drop_lapsed(KEYS[3], KEYS[4], now)
  live_head(KEYS[3], KEYS[4], nil)
end
if held then
  return 1
end
return 0
