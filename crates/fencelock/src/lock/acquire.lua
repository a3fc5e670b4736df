-- Take the lock if it is free, or confirm it if this owner already holds it (so that a retry
-- after a lost reply neither strands the lock nor hands out a second fence).
-- KEYS[1] the lock key, KEYS[2] the fence key
-- ARGV[1] the owner token, ARGV[2] the lease in milliseconds
-- Reply: {1, fence}        granted (or already held by this owner)
--        {0, pttl}         held by another owner; pttl -1 means the key has no expiry
--        {-1, key, type}   a key holds something that is not ours; nothing was written
local value = redis.pcall('get', KEYS[1])
if type(value) == 'table' then
  return {-1, KEYS[1], redis.call('type', KEYS[1]).ok}
end
if value then
  local mine = ARGV[1] .. ':'
  if string.sub(value, 1, #mine) == mine then
    redis.call('pexpire', KEYS[1], ARGV[2])
    return {1, tonumber(string.sub(value, #mine + 1))}
  end
  return {0, redis.call('pttl', KEYS[1])}
end
local last = redis.pcall('get', KEYS[2])
if type(last) == 'table' then
  return {-1, KEYS[2], redis.call('type', KEYS[2]).ok}
end
local fence = 0
if last then
  fence = tonumber(last)
  if not fence then
    return {-1, KEYS[2], 'a string that is not a number'}
  end
end
-- The fence survives a lost counter (restart without persistence, failover, flush): it is never
-- below the server's clock in microseconds, which is past every fence handed out before.
local now = redis.call('time')
fence = math.max(fence + 1, tonumber(now[1]) * 1000000 + tonumber(now[2]))
local text = string.format('%.0f', fence)
redis.call('set', KEYS[2], text)
redis.call('set', KEYS[1], ARGV[1] .. ":" .. text, 'PX', ARGV[2])
return {1, fence}
