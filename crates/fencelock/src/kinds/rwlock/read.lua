-- Take a read lock: granted while no writer holds the lock and no writer that came before this
-- reader waits for it. A refused reader records that it waits, which keeps out the writers
-- that come after it. An owner that holds the write lock may also read (a downgrade), and an
-- owner that already reads may read again even while a writer waits (refusing it would
-- deadlock that owner against the writer).
-- KEYS[1] the lock key, KEYS[2] the fence key
-- ARGV[1] the hold token, ARGV[2] the lease in milliseconds, ARGV[3] the owner token,
-- ARGV[4] how long the waiting entry lasts without a refresh, in milliseconds (0: the caller
-- does not wait, and records no entry)
-- Reply: the last write fence (granted; 0 if none) | {0, ms until an entry in the way lapses}
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
local state = scan(KEYS[1], now, ARGV[3], ARGV[1])
if redis.call('hexists', KEYS[1], field) == 0 then
  local wait = nil
  if state.writer and state.writer_owner ~= ARGV[3] then
    wait = state.writer_expiry - now
  elseif state.before['i:'] > 0 and not state.own_read and not state.writer then
    wait = state.lapses['i:'] - now
  end
  if wait then
    wait_in_line(KEYS[1], 'q:' .. ARGV[1], now, state.arrival, ARGV[4])
    return {0, wait}
  end
end
redis.call('hdel', KEYS[1], 'q:' .. ARGV[1])
redis.call('hset', KEYS[1], 'kind', 'rw', field, int(now + tonumber(ARGV[2])) .. ':' .. ARGV[3])
keep_for(KEYS[1], ARGV[2])
return last
