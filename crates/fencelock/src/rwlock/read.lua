-- Take a read lock: granted while no writer holds the lock and none waits for it. An owner that
-- holds the write lock may also read (a downgrade), and an owner that already reads may read
-- again even while a writer waits (refusing it would deadlock that owner against the writer).
-- KEYS[1] the lock key, KEYS[2] the fence key
-- ARGV[1] the hold token, ARGV[2] the lease in milliseconds, ARGV[3] the owner token
-- Reply: {1, the last write fence (0 if none)} | {0, ms until an entry in the way lapses}
--        | {-1, key, type} | {-2, 'kind', k}
local err = refuse_other_kind(KEYS[1], 'rw')
if err then
  return err
end
local last, ferr = last_fence(KEYS[2])
if ferr then
  return ferr
end
local now = now_ms()
local field = 'r:' .. ARGV[1]
local state = scan(KEYS[1], now, ARGV[3])
local mine = redis.call('hexists', KEYS[1], field) == 1
if not mine then
  if state.writer and state.writer_owner ~= ARGV[3] then
    return {0, state.writer_expiry - now}
  end
  if state.waiting_expiry and not state.own_read and not state.writer then
    return {0, state.waiting_expiry - now}
  end
end
redis.call('hset', KEYS[1], 'kind', 'rw', field, int(now + tonumber(ARGV[2])) .. ':' .. ARGV[3])
keep_for(KEYS[1], ARGV[2])
return {1, last}
