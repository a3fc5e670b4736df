-- Take the lock if it is free, or confirm it if this owner already holds it (so that a retry
-- after a lost reply neither strands the lock nor hands out a second fence).
-- KEYS[1] the lock key; the fence key (KEYS[1] .. ':fence') and the line of waiters (':waiters':
-- a sorted set, owner token -> the server millisecond at which the place lapses unless the
-- waiter refreshes it; on one server only, see mod.rs) are named here, not passed, and only
-- where they are used: every key and argument of a call is a string the server makes on each
-- run. They share the lock's hash tag, so on Redis Cluster they are in the declared key's slot,
-- which is what Redis checks for a key a script did not declare.
-- ARGV[1] the owner token, ARGV[2] the lease in milliseconds, ARGV[3] '1' when other requests
-- of this client wait for the lock (the grant is marked as waited for: see value.lua), '' or
-- absent otherwise, ARGV[4] for a request that waits for the lock to be passed to it (and then
-- only): how long its place lasts in milliseconds (it takes or refreshes one when the lock is
-- held, and gives it up when it takes the lock)
-- Reply: fence            granted (or already held by this owner): the fence as a number, or
--                         as its decimal digits (the clock's text, which costs no conversion)
--        {0, pttl}         held by another owner; pttl -1 means the key has no expiry
--        {0, pttl, lapses} held, and the caller's place lapses at this server millisecond
--        {-1, key, type}   a key holds something that is not ours; nothing was written
--        {-2, 'kind', k}   the name is used by another kind of lock; nothing was written
--
-- Three commands when the lock is free (a batch reads the clock once): TIME, SET NX GET (takes
-- the lock with the server's clock in microseconds as its fence, or returns what holds it), SET
-- GET on the fence key (writes the new fence and returns the last). The fence is
-- max(last + 1, clock), as `next_fence` gives: when the counter is ahead of the clock, the fence
-- and the lock's value are written again. That path comes first and returns; the helpers only
-- the rest uses are defined after it (script/mod.rs, `LATER_HELPERS`), so that a grant makes
-- none of their closures (each is made, and collected, on every run).
local text = clock_text()
local mark = ''
if ARGV[3] == '1' then
  mark = '+'
end
local place = ARGV[4] ~= nil
local waiters
if place then
  -- A waiter: its place is checked before anything is written, and given up before it may take
  -- the lock (and taken again below if the lock is held). The grant is marked as waited for
  -- when others are still in line, so that its release passes the lock on. (The line's code
  -- is written out here, in branches, rather than as helpers: every helper a script defines is
  -- a closure made on each run, which an uncontended acquire would pay for.)
  waiters = KEYS[1] .. ':waiters'
  local t = redis.call('type', waiters).ok
  if t ~= 'none' and t ~= 'zset' then
    return {-1, waiters, t}
  end
  if t == 'zset' then
    redis.call('zrem', waiters, ARGV[1])
    if redis.call('zcard', waiters) > 0 then
      mark = '+'
    end
  end
end
local value = redis.pcall('set', KEYS[1], ARGV[1] .. ':' .. text .. mark, 'NX', 'GET', 'PX', ARGV[2])
if not value then
  -- Taken. The fence key's TTL is kept, so that a key that turns out not to be ours is put back
  -- exactly as it was.
  local fence_key = KEYS[1] .. ':fence'
  local last = redis.pcall('set', fence_key, text, 'GET', 'KEEPTTL')
  if last and last.err then
    -- Not a string: the fence key was not written.
    redis.call('del', KEYS[1])
    return {-1, fence_key, redis.call('type', fence_key).ok}
  end
  if not last then
    return text
  end
  local now = clock_micros()
  local before = tonumber(last)
  if not before then
    redis.call('set', fence_key, last, 'KEEPTTL')
    redis.call('del', KEYS[1])
    return {-1, fence_key, 'a string that is not a number'}
  end
  if before < now then
    return now
  end
  local fence = before + 1
  text = int(fence)
  redis.call('set', fence_key, text)
  redis.call('set', KEYS[1], ARGV[1] .. ':' .. text .. mark, 'PX', ARGV[2])
  return fence
end
-- (the helpers the rest of the script uses are defined here)
-- (An error reply is a table with `err`; `.err` of a string is nil, through the string
-- library, and costs less than `type`, which makes a string on every call.)
if value.err then
  if string.sub(value.err, 1, 9) ~= 'WRONGTYPE' then
    -- Refused for another reason than the key (a read-only replica, a server out of memory):
    -- the server's own error, as it gave it. Nothing was written.
    return value
  end
  -- Not a string: nothing was written.
  return refuse_other_kind(KEYS[1], 'lock')
end
local held, waited = fence_if_held(value, ARGV[1])
if held then
  if mark ~= '' and not waited then
    redis.call('set', KEYS[1], value .. mark, 'PX', ARGV[2])
  else
    redis.call('pexpire', KEYS[1], ARGV[2])
  end
  return held
end
local pttl = redis.call('pttl', KEYS[1])
if pttl >= 0 then
  -- (A key with no expiry is no holder's lease: it is reported, and left as it is.)
  mark_waited(KEYS[1], value)
  if place then
    -- Take or refresh the place: it lapses ARGV[4] ms from now on the server's clock (the
    -- waiter matches this instant against the message that passes it the lock); the line
    -- lives as long as its longest place.
    local lapses = math.floor(clock_micros() / 1000) + tonumber(ARGV[4])
    redis.call('zadd', waiters, int(lapses), ARGV[1])
    if redis.call('pttl', waiters) < tonumber(ARGV[4]) then
      redis.call('pexpire', waiters, ARGV[4])
    end
    return {0, pttl, lapses}
  end
end
return {0, pttl}
