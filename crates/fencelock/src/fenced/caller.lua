-- A caller's own fenced script (after check.lua): the caller's body runs as a function of its
-- own KEYS and ARGV (the fence key and the fence taken off), then the resource's fence is
-- raised to the writer's. The body is the caller's: what it writes before an error stays
-- written (do every check before the first write).
--
-- KEYS[1]: the resource's fence key; KEYS[2..]: the body's keys.
-- ARGV[1]: the writer's fence; ARGV[2..]: the body's arguments.
-- Replies: {1, fence, the body's reply} applied (the reply left out when the body returns
-- nothing); check.lua's.

local reply = (function(KEYS, ARGV)
-- BODY
end)({unpack(KEYS, 2)}, {unpack(ARGV, 2)})
redis.call('set', KEYS[1], ARGV[1])
return {1, ARGV[1], reply}
