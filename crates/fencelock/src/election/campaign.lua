-- Campaigns: takes the election's lock as the plain lock's acquire does (the same value
-- `<token>:<fence>[+]`, the same fence key: a plain lock of the name is the same lock) and, in
-- the same step, writes the leader's record and announces it. `leader()` never finds the lock
-- held without its leader, and a grant is never left unannounced.
--
-- KEYS[1] the election's lock, KEYS[2] its fence key, KEYS[3] its leader record.
-- ARGV[1] the owner token, ARGV[2] the lease in milliseconds, ARGV[3] the leader's value,
-- ARGV[4] '1' when other requests of this client wait (the grant is marked as waited for, as
-- the plain lock's).
-- Reply: fence (its decimal digits) granted, or confirmed for the same token (acquire is
-- idempotent; nothing is announced again) | {0, pttl} held by another | {-1, key, type} a key
-- that is not the election's | {-2, 'kind', k} the name is another kind of lock.
local value = redis.pcall('get', KEYS[1])
if type(value) == 'table' then
  return refuse_other_kind(KEYS[1], 'lock')
end
local mark = ''
if ARGV[4] == '1' then
  mark = '+'
end
if value then
  local fence, waited = fence_if_held(value, ARGV[1])
  if fence then
    if mark ~= '' and not waited then
      redis.call('set', KEYS[1], value .. mark, 'PX', ARGV[2])
    else
      redis.call('pexpire', KEYS[1], ARGV[2])
    end
    keep_record(KEYS[3], ARGV[2])
    return fence
  end
  local pttl = redis.call('pttl', KEYS[1])
  if pttl >= 0 then
    mark_waited(KEYS[1], value)
  end
  return {0, pttl}
end
local record = redis.call('type', KEYS[3]).ok
if record ~= 'none' and record ~= 'hash' then
  return {-1, KEYS[3], record}
end
local last, err = last_fence(KEYS[2])
if err then
  return err
end
-- The next fence, max(last + 1, clock), as `next_fence` gives it, written after the message.
local fence, text = clock_micros()
if last + 1 > fence then
  text = int(last + 1)
end
-- When the term began: the term read as the server's clock in microseconds, in milliseconds (it
-- is the clock, unless the clock stepped back below the last fence). The client works it out
-- from the term the same way.
local since = int(math.floor(tonumber(text) / 1000))
publish(KEYS[1] .. ':announce', 'leader:' .. text .. ':' .. since .. ':' .. ARGV[3])
redis.call('set', KEYS[2], text)
redis.call('set', KEYS[1], ARGV[1] .. ':' .. text .. mark, 'PX', ARGV[2])
redis.call('hset', KEYS[3], 'term', text, 'since', since, 'value', ARGV[3])
keep_record(KEYS[3], ARGV[2])
return text
