-- The release's side of the plain lock's line of waiters (see line.lua), prepended to the
-- release.

-- Passes the lock to the waiter whose place lapses first among those that have not lapsed:
-- a fence of its own, and a lease that ends when its place would have lapsed (so a waiter that
-- died since its last refresh costs no more than a place; a live one confirms the lease at
-- once). The value is marked as waited for while others are still in line. Tells the waiter
-- with `to:<token>:<fence>:<lapses>`. Returns nil when nobody live waits (nothing written but
-- lapsed places), else whether the message was accepted (see `try_publish`).
local function pass_on(lock_key, fence_key, waiters, channel)
  -- The first two places: the one to pass to, and whether anyone is behind it.
  local head = redis.pcall('zrange', waiters, 0, 1, 'WITHSCORES')
  if head.err or #head == 0 then
    -- Nobody in line, or a key that is not a line (the next acquire reports it).
    return nil
  end
  local now = now_ms()
  if tonumber(head[2]) <= now then
    redis.call('zremrangebyscore', waiters, '-inf', now)
    head = redis.call('zrange', waiters, 0, 1, 'WITHSCORES')
    if #head == 0 then
      return nil
    end
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
  if #head > 2 then
    -- Someone else is in line (a place that lapses meanwhile costs one wake-up at most).
    mark = '+'
  end
  redis.call('set', lock_key, token .. ':' .. text .. mark, 'PX', lapses - now)
  return try_publish(channel, WAKE_TO .. token .. ':' .. text .. ':' .. int(lapses))
end
