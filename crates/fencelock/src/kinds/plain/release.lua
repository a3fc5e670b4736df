-- Release the lock only if this owner holds it, and wake one waiter if someone waited for it
-- (the value's mark, value.lua).
-- KEYS[1] the lock key, KEYS[2] the fence key
-- ARGV[1] the owner token, ARGV[2] the release channel, ARGV[3] the fence the owner was given
-- (or '')
-- Reply: 1 released, 2 released but the wake-up was refused (an ACL user that may not publish
-- on the channel: waiters take the lock when they next look, at the lease they were told),
-- 0 not held by this owner (nothing touched)
--
-- The wake-up is tried, not required: an uncontended release publishes nothing, so requiring it
-- would refuse such a user's releases only when someone waits. Before the key goes, the fence
-- key is raised to at least the owner's fence. Over Redlock the owner's fence is the largest of
-- its majority's; writing it back on every instance it held means that whichever majority takes
-- the lock next contains an instance that knows it.
local value = redis.pcall('get', KEYS[1])
local held, waited = holds(value, ARGV[1])
if not held then
  return 0
end
local reply = 1
if waited and not try_publish(ARGV[2], WAKE_ONE) then
  reply = 2
end
raise_fence(KEYS[2], ARGV[3])
redis.call('del', KEYS[1])
return reply
