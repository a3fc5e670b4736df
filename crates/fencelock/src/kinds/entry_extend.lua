-- Re-arm one holder entry of a lock that keeps its holders in a hash, each with a lease of its
-- own (a semaphore permit, a reader or the writer of a read-write lock).
-- KEYS[1] the lock key; ARGV[1] the holder's field, ARGV[2] the lease in milliseconds
-- Reply: 1 extended, 0 the entry is gone or its lease ran out, -1 the key is not such a lock
local t = redis.call('type', KEYS[1]).ok
if t == 'none' then
  return 0
end
if t ~= 'hash' then
  return -1
end
local value = redis.call('hget', KEYS[1], ARGV[1])
if not value then
  return 0
end
local now = now_ms()
if expiry_of(value) <= now then
  redis.call('hdel', KEYS[1], ARGV[1])
  return 0
end
local rest = string.match(value, '^%d+(.*)$')
redis.call('hset', KEYS[1], ARGV[1], int(now + tonumber(ARGV[2])) .. rest)
keep_for(KEYS[1], ARGV[2])
return 1
