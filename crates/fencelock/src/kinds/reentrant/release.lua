-- Release one hold of the reentrant lock. When it was the owner's last, the lock is free: the
-- key goes and one waiter is woken. Releasing a hold that is not there changes nothing.
-- KEYS[1] the lock key, KEYS[2] the fence key
-- ARGV[1] the hold token, ARGV[2] the release channel, ARGV[3] the fence (or '')
-- Reply: 1 released, 0 this hold was not there
if redis.call('type', KEYS[1]).ok ~= 'hash' then
  return 0
end
if redis.call('hexists', KEYS[1], 'h:' .. ARGV[1]) == 0 then
  return 0
end
if hold_count(KEYS[1]) == 1 then
  publish(ARGV[2], WAKE_ONE)
  raise_fence(KEYS[2], ARGV[3])
  redis.call('del', KEYS[1])
else
  redis.call('hdel', KEYS[1], 'h:' .. ARGV[1])
end
return 1
