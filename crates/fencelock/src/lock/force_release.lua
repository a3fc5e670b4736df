-- An operator's release: delete the lock whoever holds it, and tell waiters.
-- KEYS[1] the lock key; ARGV[1] the release channel
-- Reply: {1} released, {0} it was free, {-1, key, type} the key is not a lock (left untouched)
local value = redis.pcall('get', KEYS[1])
if type(value) == 'table' then
  return {-1, KEYS[1], redis.call('type', KEYS[1]).ok}
end
if not value then
  return {0}
end
redis.call('del', KEYS[1])
redis.call('publish', ARGV[1], 'released')
return {1}
