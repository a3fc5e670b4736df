-- What the scripts of an election share: the leader's term as the election's lock holds it.
-- The leadership is a plain lock on the election's name (KEYS[1], `<token>:<fence>` with `+`
-- once someone waited); its fence is the leader's term.
--
-- The term of the lock's holder as text, false if the lock is free, or nil and an error reply
-- if the key holds something else (another kind of lock, or a key that is not fencelock's).
local function holder_term(key)
  local value = redis.pcall('get', key)
  if type(value) == 'table' then
    return nil, {-1, key, redis.call('type', key).ok}
  end
  if not value then
    return false
  end
  local term = string.match(value, '^%x+:(%d+)%+?$')
  if not term then
    return nil, {-1, key, 'a string that is not a fencelock lock'}
  end
  return term
end
