-- The plain lock's waiters on one server (or a cluster's slot master), to whom a release passes
-- the lock: a sorted set of owner tokens, each scored with the server millisecond at which its
-- place lapses unless the waiter refreshes it (every third of the queue timeout, as it tries
-- again). Over Redlock nobody takes a place: each instance would pass the lock to a waiter of
-- its own. This file is the waiter's side, prepended to the acquire; `pass.lua` the release's.

-- {-1, key, type} when the waiters key holds something other than a sorted set; nil otherwise.
local function refuse_foreign_waiters(key)
  local t = redis.call('type', key).ok
  if t ~= 'none' and t ~= 'zset' then
    return {-1, key, t}
  end
  return nil
end

-- Takes `token` out of the line; true when other places remain (lapsed or not).
local function leave_line(key, token)
  redis.call('zrem', key, token)
  return redis.call('zcard', key) > 0
end

-- Takes or refreshes `token`'s place, which lapses `lasts` milliseconds from now (server
-- clock); the set lives as long as its longest place. Returns the instant it lapses, which the
-- waiter matches against the message that passes it the lock.
local function join_line(key, token, lasts)
  local lapses = now_ms() + tonumber(lasts)
  redis.call('zadd', key, lapses, token)
  keep_for(key, lasts)
  return lapses
end
