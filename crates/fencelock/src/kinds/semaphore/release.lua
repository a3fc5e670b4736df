-- Give back a hold of k permits (see fields.lua), or the place of a request that gives up
-- waiting, and wake the waiters: all of them while requests wait (the one to be let in is the
-- one that waits longest, which only its own try can tell), else one of each client.
-- KEYS[1] the semaphore key; ARGV[1] the hold's token, ARGV[2] the release channel, ARGV[3]
-- (unused: a semaphore writes no fence back), ARGV[4] k (absent or '': 1)
-- Reply: 1 released, 0 this hold was not held (gone, or its lease had run out)
if redis.call('type', KEYS[1]).ok ~= 'hash' then
  return 0
end
local field = 'p:' .. ARGV[1]
local value = redis.call('hget', KEYS[1], field)
local place = redis.call('hexists', KEYS[1], 'w:' .. ARGV[1]) == 1
if not value and not place then
  return 0
end
-- Reads above, the message next, the writes last (see the prelude).
local others_wait = false
local all = redis.call('hgetall', KEYS[1])
for i = 1, #all, 2 do
  if string.sub(all[i], 1, 2) == 'w:' and all[i] ~= 'w:' .. ARGV[1] then
    others_wait = true
    break
  end
end
if others_wait then
  publish(ARGV[2], WAKE_ALL)
elseif value then
  publish(ARGV[2], WAKE_ONE)
end
if place then
  redis.call('hdel', KEYS[1], 'w:' .. ARGV[1])
end
if value then
  redis.call('hdel', KEYS[1], unpack(permit_fields(ARGV[1], tonumber(ARGV[4]) or 1)))
end
if redis.call('hlen', KEYS[1]) <= #SEMAPHORE_FIELDS then
  redis.call('del', KEYS[1])
end
if not value or expiry_of(value) <= now_ms() then
  return 0
end
return 1
