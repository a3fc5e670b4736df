
-- Many calls of the script above in one: `lua!` wraps the script in `local function one(KEYS,
-- ARGV) ... end` and puts this loop after it (script/mod.rs, `Batch`).
-- KEYS: each call's keys, call after call
-- ARGV[1] the number of calls, ARGV[2] keys per call, ARGV[3] arguments per call, then each
-- call's arguments, call after call
-- Reply: one reply per call, in order. A call that raises an error (a command refused by an ACL,
-- say) gets that error as its reply and the others run on: each call's script was written so
-- that an error leaves nothing of that call behind.
local all_keys, all_args, pcall = KEYS, ARGV, pcall
local calls, nkeys, nargs = tonumber(all_args[1]), tonumber(all_args[2]), tonumber(all_args[3])
local replies = {}
-- One pair of tables for every call (no script keeps its KEYS or ARGV past its own call).
local keys, args = {}, {}
for i = 0, calls - 1 do
  local at = i * nkeys
  for k = 1, nkeys do
    keys[k] = all_keys[at + k]
  end
  at = 3 + i * nargs
  for a = 1, nargs do
    args[a] = all_args[at + a]
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
