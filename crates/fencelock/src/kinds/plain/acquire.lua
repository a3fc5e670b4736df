-- Take the lock if it is free, or confirm it if this owner already holds it (so that a retry
-- after a lost reply neither strands the lock nor hands out a second fence).
-- KEYS[1] the lock key, KEYS[2] the fence key
-- ARGV[1] the owner token, ARGV[2] the lease in milliseconds
-- Reply: {1, fence}        granted (or already held by this owner)
--        {0, pttl}         held by another owner; pttl -1 means the key has no expiry
--        {-1, key, type}   a key holds something that is not ours; nothing was written
--        {-2, 'kind', k}   the name is used by another kind of lock; nothing was written
local value = redis.pcall('get', KEYS[1])
if type(value) == 'table' then
  return refuse_other_kind(KEYS[1], 'lock')
end
if value then
  local held = fence_if_held(value, ARGV[1])
  if held then
    redis.call('pexpire', KEYS[1], ARGV[2])
    return {1, tonumber(held)}
  end
  return {0, redis.call('pttl', KEYS[1])}
end
local last, err = last_fence(KEYS[2])
if err then
  return err
end
local fence, text = next_fence(KEYS[2], last)
redis.call('set', KEYS[1], ARGV[1] .. ':' .. text, 'PX', ARGV[2])
return {1, fence}
