
-- Many calls of the script above in one: `lua!` wraps the script in `local function one(KEYS,
-- ARGV) ... end` and puts this loop after it (script/mod.rs, `Batch`).
-- KEYS: each call's keys, call after call
-- ARGV[1] the number of calls, ARGV[2] keys per call, ARGV[3] arguments per call, then each
-- call's arguments, call after call
-- Reply: one reply per call, in order. A call that raises an error (a command refused by an ACL,
-- say) gets that error as its reply and the others run on: each call's script was written so
-- that an error leaves nothing of that call behind. When every reply is a whole number from -1
-- to 9 (a renewal's, a release's), the replies come as one string instead, a character per
-- call: '0' + the number ('/' for -1). The client reads one string where it would parse a reply
-- per call (script/mod.rs, `compact_replies`).
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
local CODE = {[-1] = 47, [0] = 48, 49, 50, 51, 52, 53, 54, 55, 56, 57}
local codes = {}
for i = 1, calls do
  -- (Indexed by anything else, a string, a table or a fraction, CODE has nothing.)
  local code = CODE[replies[i]]
  if not code then
    return replies
  end
  codes[i] = code
end
return string.char(unpack(codes))
