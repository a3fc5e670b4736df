-- The state of a read-write lock (prepended to read.lua and write.lua after the prelude).
-- The lock is a hash: kind = 'rw', and one field per holder or waiter, each with a lease of its
-- own (a crashed reader blocks writers for at most its lease):
--   'r:<hold token>' = '<expiry ms>:<owner token>'            a reader
--   'w:<hold token>' = '<expiry ms>:<owner token>:<fence>'    the writer (at most one)
--   'i:<hold token>' = '<expiry ms>:<arrival ms>'             a writer waiting
--   'q:<hold token>' = '<expiry ms>:<arrival ms>'             a reader waiting
-- Waiters take turns by arrival, a phase at a time (phase-fair): a writer waiting keeps out
-- the readers that came after it (writers are not starved by a stream of readers), and a
-- reader waiting keeps out the writers that came after it (a writer that releases and asks
-- again goes after the readers that waited for it). All the readers waiting go in together.
-- A waiter's entry is refreshed while it waits and lapses after the queue timeout if it dies.
-- Entries whose lease ran out are dropped here.

-- When the waiter entry `value` arrived (0 for an entry without an arrival time).
local function arrival_of(value)
  return tonumber(string.match(value, '^%d+:(%d+)$')) or 0
end

-- `token` is the caller's hold token: its own waiting entry, if any, gives its arrival (`now`
-- if it has none yet), and the waiters of each kind that arrived before it are counted.
local function scan(key, now, owner, token)
  local state = {readers = 0, own_read = false}
  local waiters = {}
  local all = redis.call('hgetall', key)
  for i = 1, #all, 2 do
    local field, value = all[i], all[i + 1]
    local role = string.sub(field, 1, 2)
    if role == 'r:' or role == 'w:' or role == 'i:' or role == 'q:' then
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
      elseif string.sub(field, 3) == token then
        state.arrival = arrival_of(value)
      else
        table.insert(waiters, {role, expiry, arrival_of(value)})
      end
    end
  end
  -- A caller without an entry arrives now, but strictly after every waiter already there: two
  -- requests in the same millisecond must not both count as first.
  if not state.arrival then
    state.arrival = now
    for _, waiter in ipairs(waiters) do
      state.arrival = math.max(state.arrival, waiter[3] + 1)
    end
  end
  -- Per kind of waiter ('i:' writers, 'q:' readers): how many came before the caller, and the
  -- soonest any of those lapses.
  state.before = {['i:'] = 0, ['q:'] = 0}
  state.lapses = {}
  for _, waiter in ipairs(waiters) do
    local role, expiry, arrival = waiter[1], waiter[2], waiter[3]
    if arrival < state.arrival then
      state.before[role] = state.before[role] + 1
      if not state.lapses[role] or expiry < state.lapses[role] then
        state.lapses[role] = expiry
      end
    end
  end
  return state
end

-- Records (or refreshes) the caller's waiting entry `field`, keeping its arrival; it lapses
-- `queue_timeout` ms from now. A queue timeout of 0 is a request that does not wait: it takes
-- no place.
local function wait_in_line(key, field, now, arrival, queue_timeout)
  if tonumber(queue_timeout) <= 0 then
    return
  end
  redis.call('hset', key, 'kind', 'rw', field, int(now + tonumber(queue_timeout)) .. ':' .. int(arrival))
  keep_for(key, queue_timeout)
end
