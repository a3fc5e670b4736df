-- Give back one permit, and wake one waiter.
-- KEYS[1] the semaphore key; ARGV[1] the permit token, ARGV[2] the release channel
-- Reply: 1 released, 0 this permit was not held (gone, or its lease had run out)
if redis.call('type', KEYS[1]).ok ~= 'hash' then
  return 0
end
local field = 'p:' .. ARGV[1]
local value = redis.call('hget', KEYS[1], field)
if not value then
  return 0
end
publish(ARGV[2], WAKE_ONE)
redis.call('hdel', KEYS[1], field)
if redis.call('hlen', KEYS[1]) <= #SEMAPHORE_FIELDS then
  redis.call('del', KEYS[1])
end
if expiry_of(value) <= now_ms() then
  return 0
end
return 1
