-- Take the reentrant lock, or enter it again if this owner already holds it.
-- The lock is a hash: kind = 'reentrant', owner = the owner handle's token, fence = the fence
-- handed out when the lock went from free to held, and one field 'h:<hold token>' per hold
-- (each acquisition has its own hold token, so a retry after a lost reply is idempotent and a
-- release can never be counted twice). The hold count is the number of 'h:' fields. The key's
-- TTL is the lease of the whole lock; it is only ever lengthened while anyone holds it.
-- KEYS[1] the lock key, KEYS[2] the fence key
-- ARGV[1] the hold token, ARGV[2] the lease in milliseconds, ARGV[3] the owner token,
-- ARGV[4] the re-entry limit (holds per owner)
-- Reply: fence (granted) | {0, pttl} held by another owner | {-1, key, type} | {-2, 'kind', k}
--        | {-2, 'depth', limit} this owner already holds it `limit` times
local err = refuse_other_kind(KEYS[1], 'reentrant')
if err then
  return err
end
local hold = 'h:' .. ARGV[1]
if redis.call('exists', KEYS[1]) == 1 then
  if redis.call('hget', KEYS[1], 'owner') ~= ARGV[3] then
    return {0, redis.call('pttl', KEYS[1])}
  end
  if redis.call('hexists', KEYS[1], hold) == 0 then
    if hold_count(KEYS[1]) >= tonumber(ARGV[4]) then
      return {-2, 'depth', ARGV[4]}
    end
    redis.call('hset', KEYS[1], hold, '1')
  end
  keep_for(KEYS[1], ARGV[2])
  return tonumber(redis.call('hget', KEYS[1], 'fence'))
end
local last, ferr = last_fence(KEYS[2])
if ferr then
  return ferr
end
local fence, text = next_fence(KEYS[2], last)
redis.call('hset', KEYS[1], 'kind', 'reentrant', 'owner', ARGV[3], 'fence', text, hold, '1')
redis.call('pexpire', KEYS[1], ARGV[2])
return fence
