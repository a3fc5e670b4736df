-- Take the write lock: granted when no reader and no other writer holds the lock, and no reader
-- that came before this writer waits for it. A refused writer records that it waits, which
-- keeps out the readers that come after it.
-- KEYS[1] the lock key, KEYS[2] the fence key
-- ARGV[1] the hold token, ARGV[2] the lease in milliseconds, ARGV[3] the owner token,
-- ARGV[4] how long the waiting entry lasts without a refresh, in milliseconds (0: the caller
-- does not wait, and records no entry)
-- Reply: fence (granted) | {0, ms until a holder in the way lapses} | {-1, key, type}
--        | {-2, 'kind', k} | {-2, 'upgrade', ''} this owner holds a read lock
--        | {-2, 'write-reentry', ''} this owner already holds the write lock
local err = refuse_other_kind(KEYS[1], 'rw')
if err then
  return err
end
local last, ferr = last_fence(KEYS[2])
if ferr then
  return ferr
end
local now = now_ms()
local ttl = tonumber(ARGV[2])
local field = 'w:' .. ARGV[1]
local state = scan(KEYS[1], now, ARGV[3], ARGV[1])
if state.writer == field then
  local fence = string.match(redis.call('hget', KEYS[1], field), ':(%d+)$')
  redis.call('hset', KEYS[1], field, int(now + ttl) .. ':' .. ARGV[3] .. ':' .. fence)
  keep_for(KEYS[1], ttl)
  return tonumber(fence)
end
if state.writer and state.writer_owner == ARGV[3] then
  return {-2, 'write-reentry', ''}
end
if state.own_read then
  return {-2, 'upgrade', ''}
end
if state.writer or state.readers > 0 or state.before['q:'] > 0 then
  wait_in_line(KEYS[1], 'i:' .. ARGV[1], now, state.arrival, ARGV[4])
  return {0, (state.writer_expiry or state.reader_expiry or state.lapses['q:']) - now}
end
redis.call('hdel', KEYS[1], 'i:' .. ARGV[1])
local fence, text = next_fence(KEYS[2], last)
redis.call('hset', KEYS[1], 'kind', 'rw', field, int(now + ttl) .. ':' .. ARGV[3] .. ':' .. text)
keep_for(KEYS[1], ttl)
return fence
