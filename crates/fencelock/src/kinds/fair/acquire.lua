-- Take the fair lock in request order. The lock key is the plain lock's ('<token>:<fence>' with
-- the lease as TTL); waiters queue in two sorted sets next to it:
--   KEYS[3] queue: token -> ticket (arrival order: max(last ticket + 1, server ms on arrival))
--   KEYS[4] alive: token -> the instant (server ms) its place lapses unless refreshed
-- Each attempt refreshes the caller's place (a caller that finds the lock free and nobody queued
-- takes it without one); a waiter that dies stops refreshing and leaves the queue after the
-- queue timeout, so a dead waiter never blocks the others for longer.
-- KEYS[1] the lock key, KEYS[2] the fence key, KEYS[3] the queue, KEYS[4] the liveness set
-- ARGV[1] the owner token, ARGV[2] the lease in milliseconds, ARGV[3] the queue timeout in ms
-- (0: the caller does not wait, and takes no place)
-- Reply: fence (granted) | {0, ms to wait at most before trying again[, when the caller's place
--        lapses]} | {-1, key, type} | {-2, 'kind', k}
local value = redis.pcall('get', KEYS[1])
if type(value) == 'table' then
  return refuse_other_kind(KEYS[1], 'lock')
end
if value then
  local held = fence_if_held(value, ARGV[1])
  if held then
    redis.call('pexpire', KEYS[1], ARGV[2])
    return tonumber(held)
  end
  -- A key with no expiry is no holder's lease: the caller reports it, and no place is taken.
  if redis.call('pttl', KEYS[1]) < 0 then
    return {0, -1}
  end
end
for i = 3, 4 do
  local t = redis.call('type', KEYS[i]).ok
  if t ~= 'none' and t ~= 'zset' then
    return {-1, KEYS[i], t}
  end
end
-- The fence key too, before anything is written: a refused request takes no place in the queue.
local last, err = last_fence(KEYS[2])
if err then
  return err
end
local function grant()
  local fence, text = next_fence(KEYS[2], last)
  redis.call('set', KEYS[1], ARGV[1] .. ':' .. text, 'PX', ARGV[2])
  return fence
end
-- Nobody queued and the lock free: take it without a place in the queue.
if not value and redis.call('zcard', KEYS[3]) == 0 then
  return grant()
end
local now = now_ms()
drop_lapsed(KEYS[3], KEYS[4], now)
-- A queue timeout of 0 is a request that does not wait: it takes no place in the queue.
if tonumber(ARGV[3]) <= 0 then
  local head = live_head(KEYS[3], KEYS[4], nil)
  if not value and not head then
    return grant()
  end
  if value then
    return {0, redis.call('pttl', KEYS[1])}
  end
  return {0, math.max(tonumber(redis.call('zscore', KEYS[4], head)) - now, 1)}
end
if not redis.call('zscore', KEYS[3], ARGV[1]) then
  -- The ticket is max(last + 1, now): arrival order, and (as the fence rule does with the
  -- clock) the server ms the waiter arrived at, which the operator's view shows as its wait.
  local tail = redis.call('zrange', KEYS[3], -1, -1, 'withscores')
  local ticket = now
  if #tail > 0 then
    ticket = math.max(tonumber(tail[2]) + 1, now)
  end
  redis.call('zadd', KEYS[3], int(ticket), ARGV[1])
end
local head = live_head(KEYS[3], KEYS[4], ARGV[1])
if not value and head == ARGV[1] then
  redis.call('zrem', KEYS[3], ARGV[1])
  redis.call('zrem', KEYS[4], ARGV[1])
  return grant()
end
local lapses = now + tonumber(ARGV[3])
redis.call('zadd', KEYS[4], int(lapses), ARGV[1])
keep_for(KEYS[3], ARGV[3])
keep_for(KEYS[4], ARGV[3])
-- A waiter behind the head comes back when the head's place lapses, at the latest: a release
-- wakes only the head (and names the one behind it), and a dead head must not keep the others
-- waiting for longer than its queue timeout. (A live head refreshes its place long before that.)
local head_lapses = nil
if head ~= ARGV[1] then
  head_lapses = math.max(tonumber(redis.call('zscore', KEYS[4], head) or now) - now, 1)
end
-- The third element: when the caller's place lapses, which a release that passes it the lock
-- names (see release.lua).
if value then
  return {0, math.min(redis.call('pttl', KEYS[1]), head_lapses or math.huge), lapses}
end
-- Free, but another waiter is first: it takes the lock, or its place lapses.
return {0, head_lapses or 1, lapses}
