-- The reentrant lock's hash: these fields, plus one 'h:<hold token>' = '1' per hold.
local REENTRANT_FIELDS = {'kind', 'owner', 'fence'}

-- How many holds the owner has in the reentrant lock at `key`.
local function hold_count(key)
  return redis.call('hlen', key) - #REENTRANT_FIELDS
end
