-- The fence check every fenced write starts with: stops the script (nothing written) when the
-- writer's fence is older than the largest the resource has accepted, or when the resource's
-- fence key holds something else. The script raises the fence itself once its writes are done.
--
-- KEYS[1]: the resource's fence key (it never expires); ARGV[1]: the writer's fence.
-- Replies (early): {0, accepted} stale; {-1, key, found} a key of the wrong type.

local fence = tonumber(ARGV[1])
local stored = redis.pcall('get', KEYS[1])
if type(stored) == 'table' then
  return {-1, KEYS[1], redis.call('type', KEYS[1]).ok}
end
local accepted = 0
if stored then
  accepted = tonumber(stored)
  if not accepted then
    return {-1, KEYS[1], 'a string that is not a number'}
  end
end
if fence < accepted then
  return {0, stored}
end

