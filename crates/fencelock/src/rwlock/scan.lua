-- The state of a read-write lock (prepended to read.lua and write.lua after the prelude).
-- The lock is a hash: kind = 'rw', and one field per holder or waiting writer, each with a lease
-- of its own (a crashed reader blocks writers for at most its lease):
--   'r:<hold token>' = '<expiry ms>:<owner token>'            a reader
--   'w:<hold token>' = '<expiry ms>:<owner token>:<fence>'    the writer (at most one)
--   'i:<hold token>' = '<expiry ms>'                          a writer waiting for readers
-- A waiting writer's entry keeps new readers out (writers are not starved); it is refreshed
-- while the writer waits and lapses after the queue timeout if the writer dies.
-- Entries whose lease ran out are dropped here.
local function scan(key, now, owner)
  local state = {readers = 0, own_read = false}
  local all = redis.call('hgetall', key)
  for i = 1, #all, 2 do
    local field, value = all[i], all[i + 1]
    local role = string.sub(field, 1, 2)
    if role == 'r:' or role == 'w:' or role == 'i:' then
      local expiry = expiry_of(value)
      if expiry <= now then
        redis.call('hdel', key, field)
      elseif role == 'r:' then
        state.readers = state.readers + 1
        if not state.reader_expiry or expiry < state.reader_expiry then
          state.reader_expiry = expiry
        end
        if string.match(value, '^%d+:(%x+)') == owner then
          state.own_read = true
        end
      elseif role == 'w:' then
        state.writer = field
        state.writer_owner = string.match(value, '^%d+:(%x+)')
        state.writer_expiry = expiry
      elseif not state.waiting_expiry or expiry < state.waiting_expiry then
        state.waiting_expiry = expiry
      end
    end
  end
  return state
end
