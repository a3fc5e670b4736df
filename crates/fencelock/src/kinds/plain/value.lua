-- The plain lock's value, `<owner token>:<fence>` with the lease as the key's TTL (the fair lock
-- holds its key the same way), and `+` after the fence once someone waited for it: an acquire
-- that finds the lock held appends it, and the release publishes a wake-up only then, so an
-- uncontended cycle runs no PUBLISH. Prepended to the scripts that read it.

-- Whether `token` holds the plain or fair lock whose value is `value` (false for another
-- holder, no value, or an error table from a pcall), and whether someone waited for it. Makes
-- no new string: ':' is byte 58, '+' byte 43.
local function holds(value, token)
  if type(value) ~= 'string' or string.byte(value, #token + 1) ~= 58
      or string.find(value, token, 1, true) ~= 1 then
    return false, false
  end
  return true, string.byte(value, -1) == 43
end

-- The fence (as a string) in a plain or fair lock's value `<token>:<fence>[+]` when `token`
-- holds it, and whether someone waited for it; nil otherwise.
local function fence_if_held(value, token)
  local held, waited = holds(value, token)
  if not held then
    return nil
  end
  if waited then
    return string.sub(value, #token + 2, -2), true
  end
  return string.sub(value, #token + 2), false
end

-- Marks another holder's value as waited for (once), so that its release wakes a waiter. A
-- value that is not a lock's is left untouched.
local function mark_waited(key, value)
  if string.match(value, '^%x+:%d+$') then
    redis.call('set', key, value .. '+', 'KEEPTTL')
  end
end
