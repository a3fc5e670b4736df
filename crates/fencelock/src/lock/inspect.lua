-- Read a lock's state without changing it.
-- KEYS[1] the lock key, KEYS[2] the fence key
-- Reply: {1, value or '', pttl, last fence or ''}
--        {-1, key, type}   a key holds something that is not ours
local value = redis.pcall('get', KEYS[1])
if type(value) == 'table' then
  return {-1, KEYS[1], redis.call('type', KEYS[1]).ok}
end
local fence = redis.pcall('get', KEYS[2])
if type(fence) == 'table' then
  return {-1, KEYS[2], redis.call('type', KEYS[2]).ok}
end
return {1, value or '', redis.call('pttl', KEYS[1]), fence or ''}
