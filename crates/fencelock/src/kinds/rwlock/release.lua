-- Release a read or write hold (and a waiter's entry), and wake every waiter: after a writer,
-- all the waiting readers may go at once.
-- KEYS[1] the lock key, KEYS[2] the fence key
-- ARGV[1] the hold token, ARGV[2] the release channel, ARGV[3] the writer's fence (or '')
-- Reply: 1 a live hold was released, 0 none was there (nothing else touched)
if redis.call('type', KEYS[1]).ok ~= 'hash' then
  return 0
end
local now = now_ms()
-- First what this hold has in the hash (reads only), then the message, then the writes.
local mine = {}
for _, role in ipairs({'w:', 'r:', 'i:', 'q:'}) do
  local value = redis.call('hget', KEYS[1], role .. ARGV[1])
  if value then
    table.insert(mine, {role, value})
  end
end
if #mine == 0 then
  return 0
end
publish(ARGV[2], WAKE_ALL)
local released = 0
for _, entry in ipairs(mine) do
  local role, value = entry[1], entry[2]
  redis.call('hdel', KEYS[1], role .. ARGV[1])
  if (role == 'w:' or role == 'r:') and expiry_of(value) > now then
    released = 1
  end
  if role == 'w:' then
    raise_fence(KEYS[2], ARGV[3])
  end
end
if redis.call('hlen', KEYS[1]) <= #RW_FIELDS then
  redis.call('del', KEYS[1])
end
return released
