-- Release a read or write hold (and a waiter's entry), and wake every waiter: after a writer,
-- all the waiting readers may go at once.
-- KEYS[1] the lock key, KEYS[2] the fence key
-- ARGV[1] the hold token, ARGV[2] the release channel, ARGV[3] the writer's fence (or '')
-- Reply: 1 a live hold was released, 0 none was there (nothing else touched)
if redis.call('type', KEYS[1]).ok ~= 'hash' then
  return 0
end
local now = now_ms()
local released = 0
local changed = false
for _, role in ipairs({'w:', 'r:', 'i:', 'q:'}) do
  local field = role .. ARGV[1]
  local value = redis.call('hget', KEYS[1], field)
  if value then
    redis.call('hdel', KEYS[1], field)
    changed = true
    if (role == 'w:' or role == 'r:') and expiry_of(value) > now then
      released = 1
    end
    if role == 'w:' then
      raise_fence(KEYS[2], ARGV[3])
    end
  end
end
if changed then
  if redis.call('hlen', KEYS[1]) <= #RW_FIELDS then
    redis.call('del', KEYS[1])
  end
  redis.call('publish', ARGV[2], WAKE_ALL)
end
return released
