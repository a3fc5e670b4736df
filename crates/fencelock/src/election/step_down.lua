-- Steps down: releases the election's lock if this owner holds it and, in the same step,
-- announces the resignation (`resigned:<term>`) and deletes the leader's record if it is this
-- term's. A leadership dropped unresigned goes the same way (its release in the background).
--
-- KEYS[1] the election's lock, KEYS[2] its leader record.
-- ARGV[1] `<token>:<fence>` as the grant wrote it, or the owner token alone (a grant given back
-- unseen).
-- Reply: 1 resigned and released, 0 not held by this owner (nothing changed).
local value = redis.pcall('get', KEYS[1])
local held, waited = holds(value, string.match(ARGV[1], '^[^:]*'))
if not held then
  return 0
end
local term = string.match(value, '^%x+:(%d+)')
publish(KEYS[1] .. ':announce', 'resigned:' .. term)
if waited then
  -- The campaigns waiting for the lock: one of each client tries again.
  try_publish(KEYS[1] .. ':released', WAKE_ONE)
end
local recorded = redis.pcall('hget', KEYS[2], 'term')
if recorded == term then
  redis.call('del', KEYS[2])
end
redis.call('del', KEYS[1])
return 1
