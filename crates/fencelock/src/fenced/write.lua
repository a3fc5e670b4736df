-- A fenced write (after check.lua): applies the writes and raises the resource's fence to the
-- writer's. Nothing is written when a write would fail on a key of the wrong type (a script
-- error does not roll back the writes before it, so every check comes first).
--
-- KEYS[1]: the resource's fence key; KEYS[2..]: the keys the writes touch.
-- ARGV[1]: the writer's fence; then each write as: command, index of its key in KEYS, number of
-- arguments, the arguments.
-- Replies: {1, fence} applied; {-1, key, found} a key of the wrong type (and check.lua's).

-- What each command needs to find at its key ('none' is always fine).
local wants = {
  set = 'any', del = 'any', pexpire = 'any', expire = 'any',
  hset = 'hash', hdel = 'hash', incrby = 'string',
  rpush = 'list', lpush = 'list', xadd = 'stream', sadd = 'set', srem = 'set',
}
local writes = {}
local i = 2
while i <= #ARGV do
  local command = ARGV[i]
  local key = KEYS[tonumber(ARGV[i + 1])]
  local n = tonumber(ARGV[i + 2])
  local wanted = wants[command]
  if not wanted or not key then
    return redis.error_reply('fenced write: unknown command or key ' .. tostring(command))
  end
  if wanted ~= 'any' then
    local found = redis.call('type', key).ok
    if found ~= 'none' and found ~= wanted then
      return {-1, key, found}
    end
    if command == 'incrby' and found == 'string' and not tonumber(redis.call('get', key)) then
      return {-1, key, 'a string that is not a number'}
    end
  end
  local args = {}
  for j = 1, n do
    args[j] = ARGV[i + 2 + j]
  end
  writes[#writes + 1] = {command, key, args}
  i = i + 3 + n
end

redis.call('set', KEYS[1], ARGV[1])
for _, w in ipairs(writes) do
  redis.call(w[1], w[2], unpack(w[3]))
end
return {1, ARGV[1]}
