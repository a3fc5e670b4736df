-- Over Redlock: put this owner's hold back on an instance that lost it (restarted empty) while
-- the owner still holds a majority elsewhere. Never takes a lock held by anyone else.
-- KEYS[1] the lock key, KEYS[2] the fence key
-- ARGV[1] the owner token, ARGV[2] the lease in milliseconds, ARGV[3] the owner's fence
-- Reply: 1 put back, 0 the key exists (left as it is)
if redis.call('exists', KEYS[1]) == 1 then
  return 0
end
raise_fence(KEYS[2], ARGV[3])
redis.call('set', KEYS[1], ARGV[1] .. ':' .. ARGV[3], 'PX', ARGV[2])
return 1
