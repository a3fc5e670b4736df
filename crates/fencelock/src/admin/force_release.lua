-- An operator's release: delete the lock whoever holds it (any kind of fencelock lock), and wake
-- every waiter.
-- KEYS[1] the lock key; ARGV[1] the release channel
-- Reply: {1} released, {0} it was free, {-1, key, type} the key is not a lock (left untouched)
local kind, err = kind_of(KEYS[1])
if err then
  return err
end
if kind == 'free' then
  return {0}
end
publish(ARGV[1], WAKE_ALL)
redis.call('del', KEYS[1])
return {1}
