-- The plain lock's value, `<owner token>:<fence>` with the lease as the key's TTL (the fair lock
-- holds its key the same way), and `+` after the fence once someone waited for it: an acquire
-- that finds the lock held appends it, and the release publishes a wake-up only then, so an
-- uncontended cycle runs no PUBLISH. Prepended to the scripts that read it.

-- The fence (as a string) in a plain or fair lock's value `<token>:<fence>[+]` when `token`
-- holds it, and whether someone waited for it; nil otherwise (another holder, no value, or an
-- error table from a pcall).
local function fence_if_held(value, token)
  if type(value) ~= 'string' then
    return nil
  end
  local mine = token .. ':'
  if string.sub(value, 1, #mine) ~= mine then
    return nil
  end
  if string.byte(value, -1) == 43 then
    return string.sub(value, #mine + 1, -2), true
  end
  return string.sub(value, #mine + 1), false
end

-- Marks another holder's value as waited for (once), so that its release wakes a waiter. A
-- value that is not a lock's is left untouched.
local function mark_waited(key, value)
  if string.match(value, '^%x+:%d+$') then
    redis.call('set', key, value .. '+', 'KEEPTTL')
  end
end
