-- Every script that publishes does so before it writes anything: an ACL user that may not
-- publish on the channel is refused by the PUBLISH, and a script error does not roll back the
-- writes made before it, so publishing first means a refusal changes nothing. (Subscribers get
-- the message only after the script has ended, so nobody can act on it early.)

-- Helpers shared by fencelock's scripts: `lua!` (script/mod.rs) puts the ones a script calls,
-- after the wake-up payloads, in front of it, so that every script stays one EVALSHA and defines
-- no closure it never calls. One helper a paragraph, with no blank line inside (a paragraph is
-- what `used_helpers` keeps or leaves out). Helpers that only one kind of lock needs live with
-- that kind.

-- Publishes a release message on the lock's channel: PUBLISH, or SPUBLISH on Redis Cluster
-- (`PUBLISH_COMMAND` is set in front of the prelude; see script/mod.rs), where a plain PUBLISH
-- would be broadcast to every node and a sharded one stays in the lock's slot.
local function publish(channel, message)
  redis.call(PUBLISH_COMMAND, channel, message)
end

-- Publishes like `publish`, but answers false instead of raising when the server refuses (an
-- ACL user that may not publish on the channel), for a script that goes on without it.
local function try_publish(channel, message)
  return type(redis.pcall(PUBLISH_COMMAND, channel, message)) ~= 'table'
end

-- Whether a message published on the channel of one waiter, `<channel>:<token>` (where only the
-- client of the waiter with that owner token listens), reached a client; a refusal (an ACL user
-- that may not publish there) did not.
local function reached(channel, token, message)
  local n = redis.pcall(PUBLISH_COMMAND, channel .. ':' .. token, message)
  return type(n) == 'number' and n > 0
end

-- Whether a message addressed to the waiter `token`, and to `behind` (the next in line) if
-- given, reached both on their own channels: one write, to the client that waits, where the
-- lock's channel goes to every client that waits for the lock, so a pass costs the same however
-- many wait. Once one has nobody listening there (a client of protocol 1, a subscription not
-- made yet, a refusal), the message must go on the lock's channel, which reaches both.
local function reached_own(channel, message, token, behind)
  return reached(channel, token, message) and (not behind or reached(channel, behind, message))
end

-- Publishes a message addressed to waiters on their own channels (`reached_own`), or else on the
-- lock's channel, as `publish` sends it.
local function publish_to(channel, message, token, behind)
  if not reached_own(channel, message, token, behind) then
    publish(channel, message)
  end
end

-- As `publish_to`, but answers false instead of raising when the lock's channel refuses the
-- message (see `try_publish`).
local function try_publish_to(channel, message, token, behind)
  return reached_own(channel, message, token, behind) or try_publish(channel, message)
end

-- The server's clock as TIME gives it, read once per script run: the calls of a batch share it
-- (script/batch.lua), and fences stay unique per fence key (see `next_fence`).
local clock
local function server_time()
  if not clock then
    clock = redis.call('time')
  end
  return clock
end

-- A whole number as Redis wants it in a string: no exponent, no decimals. Below 2^53 (every
-- fence, clock and expiry) as an integer, which costs a fraction of a float's formatting (and
-- of Redis's own, for a number passed to a call as it is), where the server's `%d` holds it:
-- Lua 5.1 casts a `%d` argument to a C `long`, 32 bits on 32-bit builds and on Windows ports,
-- where clocks, expiries and fences overflow. Probed once per script run (a batch's calls share
-- it); `%.0f` there.
local long_holds_64
local function int(n)
  if long_holds_64 == nil then
    long_holds_64 = string.format('%d', 1099511627776) == '1099511627776'
  end
  if long_holds_64 and n >= 0 and n < 9007199254740992 then
    return string.format('%d', n)
  end
  return string.format('%.0f', n)
end

-- The server's clock in microseconds as text (no exponent, no decimals), worked out once per
-- script run from TIME's two parts: a concatenation, where `int` (string.format) and reading the
-- two parts as numbers cost as much as a Redis command.
local micros_text
local function clock_text()
  if not micros_text then
    local t = server_time()
    micros_text = t[1] .. string.rep('0', 6 - #t[2]) .. t[2]
  end
  return micros_text
end

-- The server's clock in microseconds, as a number and as text, worked out once per script run
-- (the calls of a batch share it).
local micros
local function clock_micros()
  if not micros then
    micros = tonumber(clock_text())
  end
  return micros, micros_text
end

-- The server's clock in milliseconds (holders' expiry times are on this clock).
local function now_ms()
  return math.floor(clock_micros() / 1000)
end

-- The last fence handed out (0 if none), or nil and an error reply if the key is not ours.
local function last_fence(key)
  local last = redis.pcall('get', key)
  if type(last) == 'table' then
    return nil, {-1, key, redis.call('type', key).ok}
  end
  if not last then
    return 0
  end
  local fence = tonumber(last)
  if not fence then
    return nil, {-1, key, 'a string that is not a number'}
  end
  return fence
end

-- Hands out the next fence after `last`. It is never below the server's clock in microseconds,
-- which is past every fence handed out before, so fences keep growing after a lost counter
-- (restart without persistence, failover, flush).
local function next_fence(key, last)
  local now, now_text = clock_micros()
  local fence, text = now, now_text
  if last + 1 > now then
    fence = last + 1
    text = int(fence)
  end
  redis.call('set', key, text)
  return fence, text
end

-- Raises the fence key to at least `floor` (a decimal string; '' means no floor). Over Redlock a
-- release writes its fence back this way, so that the next majority knows it.
local function raise_fence(key, floor)
  local fence = tonumber(floor)
  if not fence then
    return
  end
  local last = redis.pcall('get', key)
  if last == false or (type(last) == 'string' and tonumber(last) and tonumber(last) < fence) then
    redis.call('set', key, floor)
  end
end

-- What a lock key holds: 'free', 'lock' (a plain or fair lock), or the kind recorded in a hash
-- ('reentrant', 'rw', 'semaphore'); or nil and an error reply for a key that is not a lock.
local function kind_of(key)
  local t = redis.call('type', key).ok
  if t == 'none' then
    return 'free'
  end
  if t == 'hash' then
    local kind = redis.call('hget', key, 'kind')
    if kind then
      return kind
    end
    return nil, {-1, key, 'hash'}
  end
  if t == 'string' then
    if string.match(redis.call('get', key), '^%x+:%d+%+?$') then
      return 'lock'
    end
    return nil, {-1, key, 'a string that is not a fencelock lock'}
  end
  return nil, {-1, key, t}
end

-- An error reply if the lock key holds anything but a lock of `kind` (or nothing).
local function refuse_other_kind(key, kind)
  local found, err = kind_of(key)
  if err then
    return err
  end
  if found ~= 'free' and found ~= kind then
    return {-2, 'kind', found}
  end
  return nil
end

-- Sets the key's TTL to at least `ttl` milliseconds (never shortens it: other holders' leases
-- live in the same key).
local function keep_for(key, ttl)
  if redis.call('pttl', key) < tonumber(ttl) then
    redis.call('pexpire', key, ttl)
  end
end
