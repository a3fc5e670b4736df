-- Re-arm the reentrant lock's lease if this hold is still part of it (never shortening it).
-- KEYS[1] the lock key; ARGV[1] the hold token, ARGV[2] the lease in milliseconds
-- Reply: 1 extended, 0 the key is gone, -1 the key is there without this hold
local t = redis.call('type', KEYS[1]).ok
if t == 'none' then
  return 0
end
if t ~= 'hash' or redis.call('hexists', KEYS[1], 'h:' .. ARGV[1]) == 0 then
  return -1
end
keep_for(KEYS[1], ARGV[2])
return 1
