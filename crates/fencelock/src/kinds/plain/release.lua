-- Release the lock only if this owner holds it, and wake one waiter.
-- KEYS[1] the lock key, KEYS[2] the fence key
-- ARGV[1] the owner token, ARGV[2] the release channel, ARGV[3] the fence the owner was given
-- (or '')
-- Reply: 1 released, 0 not held by this owner (nothing touched)
--
-- Before the key goes, the fence key is raised to at least the owner's fence. Over Redlock the
-- owner's fence is the largest of its majority's; writing it back on every instance it held means
-- that whichever majority takes the lock next contains an instance that knows it.
local value = redis.pcall('get', KEYS[1])
if fence_if_held(value, ARGV[1]) then
  publish(ARGV[2], WAKE_ONE)
  raise_fence(KEYS[2], ARGV[3])
  redis.call('del', KEYS[1])
  return 1
end
return 0
