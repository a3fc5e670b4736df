-- Release the lock only if this owner holds it, and tell waiters.
-- KEYS[1] the lock key; ARGV[1] the owner token, ARGV[2] the release channel
-- Reply: 1 released, 0 not held by this owner (nothing touched)
local value = redis.pcall('get', KEYS[1])
local mine = ARGV[1] .. ':'
if type(value) == 'string' and string.sub(value, 1, #mine) == mine then
  redis.call('del', KEYS[1])
  redis.call('publish', ARGV[2], 'released')
  return 1
end
return 0
