-- Re-arms the leader's lease only if this owner holds the election's lock, as the plain lock's
-- extend.lua does, and its record's expiry with it (record.lua).
-- KEYS[1] the election's lock, KEYS[2] its leader record.
-- ARGV[1] the owner token, ARGV[2] the lease in milliseconds.
-- Reply: 1 extended, 0 the key is gone, -1 another owner (or something else) is there;
-- nothing is touched unless the reply is 1
local value = redis.pcall('get', KEYS[1])
if holds(value, ARGV[1]) then
  keep_record(KEYS[2], ARGV[2])
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
if value then
  return -1
end
return 0
