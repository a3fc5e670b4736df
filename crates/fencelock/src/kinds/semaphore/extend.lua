-- Re-arm a hold of k permits (k > 1: a hold of one is re-armed by `entry_extend.lua`).
-- KEYS[1] the semaphore key; ARGV[1] the hold's token, ARGV[2] the lease in milliseconds,
-- ARGV[3] k
-- Reply: 1 extended, 0 the hold is gone or its lease ran out, -1 the key is not such a lock
local t = redis.call('type', KEYS[1]).ok
if t == 'none' then
  return 0
end
if t ~= 'hash' then
  return -1
end
local fields = permit_fields(ARGV[1], tonumber(ARGV[3]))
local value = redis.call('hget', KEYS[1], fields[1])
if not value then
  return 0
end
local now = now_ms()
if expiry_of(value) <= now then
  redis.call('hdel', KEYS[1], unpack(fields))
  return 0
end
local renewed = int(now + tonumber(ARGV[2])) .. string.match(value, '^%d+(.*)$')
local args = {}
for _, f in ipairs(fields) do
  args[#args + 1] = f
  args[#args + 1] = renewed
end
redis.call('hset', KEYS[1], unpack(args))
keep_for(KEYS[1], ARGV[2])
return 1
