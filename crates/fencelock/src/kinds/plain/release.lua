-- Release the lock only if this owner holds it. If someone waited for it (the value's mark,
-- value.lua), pass it to the waiter first in line: the one whose place lapses first among those
-- that have not lapsed, with a fence of its own and a short lease, the claim (PASS_CLAIM_MS, or
-- until its place would have lapsed if that is sooner: a live waiter confirms the full lease
-- within it, a waiter that died since its last refresh costs no more), marked as waited for
-- while others are still in line, and told with `to:<token>:<fence>:<lapses>:<ends>`, followed
-- by `:<token>` of the next in line if there is one (it tries again when the claim ends), on
-- each one's own channel (`publish_to`). With nobody in line, wake one waiter of each client.
-- KEYS[1] the lock key; ARGV[1] on one server the value the owner's grant wrote,
-- `<token>:<fence>`, otherwise (over Redlock, where each instance's value has a fence of its own,
-- and for a grant given back unseen) the owner token alone; ARGV[2] (over Redlock only) the
-- fence the owner was given, written back as a floor. The fence key (KEYS[1] .. ':fence'), the release
-- channel (':released') and the line of waiters (':waiters', see acquire.lua) are named here,
-- not passed, and only in the branches that use them: every key and argument of a call is a
-- string the server makes on each run, and an
-- uncontended release on one server uses none of them. They share the lock's hash tag, so on
-- Redis Cluster they are in the slot of the declared key, which is what Redis checks for a key
-- a script did not declare.
-- Reply: 1 released (or passed on), 2 released but the message was refused (an ACL user that
-- may not publish on the channel: waiters take the lock when they next look, at the lease they
-- were told or their place's refresh), 0 not held by this owner (its place in line, if any, is
-- given up; nothing else is touched)
--
-- The message is tried, not required: an uncontended release publishes nothing, so requiring it
-- would refuse such a user's releases only when someone waits. Before the key goes, the fence
-- key is raised to at least the owner's fence. Over Redlock the owner's fence is the largest of
-- its majority's; writing it back on every instance it held means that whichever majority takes
-- the lock next contains an instance that knows it. The pass is written out in its branch rather
-- than as helpers, so that an uncontended release makes no closure it does not call.
local value = redis.pcall('get', KEYS[1])
-- The value as the grant wrote it, nobody having waited: one comparison (Lua compares strings by
-- reference), where looking for the token in it costs three string functions. Anything else is
-- judged by the token alone. On one
-- server that is the whole release, and it comes first: the helpers only the rest uses are
-- defined after it (script/mod.rs, `LATER_HELPERS`), so that it makes none of their closures.
if value == ARGV[1] and not ARGV[2] then
  redis.call('del', KEYS[1])
  return 1
end
-- (the helpers the rest of the script uses are defined here)
local held, waited = value == ARGV[1], false
if not held then
  local token = ARGV[1]
  if not ARGV[2] then
    token = string.match(token, '^[^:]*')
  end
  held, waited = holds(value, token)
  if not held then
    -- A waiter that gives up (or whose request was cancelled).
    local waiters = KEYS[1] .. ':waiters'
    if redis.call('type', waiters).ok == 'zset' then
      redis.call('zrem', waiters, token)
    end
    return 0
  end
end
if ARGV[2] then
  raise_fence(KEYS[1] .. ':fence', ARGV[2])
end
if not waited then
  redis.call('del', KEYS[1])
  return 1
end
local channel = KEYS[1] .. ':released'
-- The first two places: the one to pass to, and whether anyone is behind it. (A key that is not
-- a line, or a fence key that is not ours, passes nothing: the next acquire reports it.)
local waiters, fence_key = KEYS[1] .. ':waiters', KEYS[1] .. ':fence'
local line = redis.pcall('zrange', waiters, 0, 1, 'WITHSCORES')
local last = nil
if not line.err and #line > 0 then
  last = redis.pcall('get', fence_key)
  last = (last == false and 0) or (type(last) == 'string' and tonumber(last))
end
if last then
  local t = redis.call('time')
  local clock_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local now = math.floor(clock_us / 1000)
  if tonumber(line[2]) <= now then
    redis.call('zremrangebyscore', waiters, '-inf', now)
    line = redis.call('zrange', waiters, 0, 1, 'WITHSCORES')
  end
  if #line > 0 then
    local token, lapses = line[1], tonumber(line[2])
    redis.call('zrem', waiters, token)
    -- The next fence: max(last + 1, clock), as every grant's.
    local fence = int(math.max(last + 1, clock_us))
    redis.call('set', fence_key, fence)
    local mark, behind, second = '', '', nil
    if #line > 2 then
      -- Someone else is in line (a place that lapses meanwhile costs one wake-up at most): it
      -- is named, and told, so that it tries again when the claim below runs out.
      mark = '+'
      second = line[3]
      behind = ':' .. second
    end
    -- The passed lease is a claim: PASS_CLAIM_MS, or less if the place lapses sooner. A live
    -- waiter confirms its full lease within it; one that died since its last refresh keeps
    -- the lock idle no longer than that.
    local ends = math.min(lapses, now + PASS_CLAIM_MS)
    redis.call('set', KEYS[1], token .. ':' .. fence .. mark, 'PX', int(ends - now))
    if try_publish_to(channel, WAKE_TO .. token .. ':' .. fence .. ':' .. int(lapses)
        .. ':' .. int(ends) .. behind, token, second) then
      return 1
    end
    return 2
  end
end
redis.call('del', KEYS[1])
if try_publish(channel, WAKE_ONE) then
  return 1
end
return 2
