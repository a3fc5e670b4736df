
-- Many calls of the script above in one: `lua!` wraps the script in `local function one(KEYS,
-- ARGV) ... end` and puts this loop after it (script/mod.rs, `Batch`).
-- KEYS: each call's keys, call after call
-- ARGV[1] the number of calls, ARGV[2] keys per call, ARGV[3] arguments per call, then each
-- call's arguments, call after call
-- Reply: one reply per call, in order. A call that raises an error (a command refused by an ACL,
-- say) gets that error as its reply and the others run on: each call's script was written so
-- that an error leaves nothing of that call behind.
local calls, nkeys, nargs = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local replies = {}
-- One pair of tables for every call (no script keeps its KEYS or ARGV past its own call).
local keys, args = {}, {}
for i = 0, calls - 1 do
  for k = 1, nkeys do
    keys[k] = KEYS[i * nkeys + k]
  end
  for a = 1, nargs do
    args[a] = ARGV[3 + i * nargs + a]
  end
  local ok, reply = pcall(one, keys, args)
  if ok then
    replies[i + 1] = reply
  elseif type(reply) == 'table' and reply.err then
    replies[i + 1] = reply
  else
    replies[i + 1] = redis.error_reply(tostring(reply))
  end
end
return replies
