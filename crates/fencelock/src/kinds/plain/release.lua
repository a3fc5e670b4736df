-- Release the lock only if this owner holds it. If someone waited for it (the value's mark,
-- value.lua), pass it to the next waiter in line (pass.lua), or, with nobody in line, wake
-- one waiter.
-- KEYS[1] the lock key, KEYS[2] the fence key, KEYS[3] the waiters
-- ARGV[1] the owner token, ARGV[2] the release channel, ARGV[3] the fence the owner was given
-- (or '')
-- Reply: 1 released (or passed on), 2 released but the message was refused (an ACL user that
-- may not publish on the channel: waiters take the lock when they next look, at the lease they
-- were told or their place's refresh), 0 not held by this owner (its place in line, if any, is
-- given up; nothing else is touched)
--
-- The message is tried, not required: an uncontended release publishes nothing, so requiring it
-- would refuse such a user's releases only when someone waits. Before the key goes, the fence
-- key is raised to at least the owner's fence. Over Redlock the owner's fence is the largest of
-- its majority's; writing it back on every instance it held means that whichever majority takes
-- the lock next contains an instance that knows it.
local value = redis.pcall('get', KEYS[1])
local held, waited = holds(value, ARGV[1])
if not held then
  -- A waiter that gives up (or whose request was cancelled).
  if redis.call('type', KEYS[3]).ok == 'zset' then
    redis.call('zrem', KEYS[3], ARGV[1])
  end
  return 0
end
raise_fence(KEYS[2], ARGV[3])
if not waited then
  redis.call('del', KEYS[1])
  return 1
end
local passed = pass_on(KEYS[1], KEYS[2], KEYS[3], ARGV[2])
if passed == nil then
  redis.call('del', KEYS[1])
  passed = try_publish(ARGV[2], WAKE_ONE)
end
if passed then
  return 1
end
return 2
