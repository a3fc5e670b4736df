-- The release's side of the plain lock's line of waiters (see line.lua), prepended to the
-- release.

-- Passes the lock to the waiter whose place lapses first among those that have not lapsed:
-- a fence of its own, and a lease that ends when its place would have lapsed (so a waiter that
-- died since its last refresh costs no more than a place; a live one confirms the lease at
-- once). The value is marked as waited for while others are still in line. Tells the waiter
-- with `to:<token>:<fence>:<lapses>`. Returns nil when nobody live waits (nothing written but
-- lapsed places), else whether the message was accepted (see `try_publish`).
local function pass_on(lock_key, fence_key, waiters, channel)
  if redis.call('type', waiters).ok ~= 'zset' then
    return nil
  end
  local now = now_ms()
  redis.call('zremrangebyscore', waiters, '-inf', now)
  local head = redis.call('zrange', waiters, 0, 0, 'WITHSCORES')
  if #head == 0 then
    return nil
  end
  local last, err = last_fence(fence_key)
  if err then
    -- The fence key is not ours: the lock is not passed; the next acquire reports it.
    return nil
  end
  local token, lapses = head[1], tonumber(head[2])
  redis.call('zrem', waiters, token)
  local _, text = next_fence(fence_key, last)
  local mark = ''
  if redis.call('zcard', waiters) > 0 then
    mark = '+'
  end
  redis.call('set', lock_key, token .. ':' .. text .. mark, 'PX', lapses - now)
  return try_publish(channel, WAKE_TO .. token .. ':' .. text .. ':' .. int(lapses))
end
