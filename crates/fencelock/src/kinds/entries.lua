-- Holder entries: a lock that keeps its holders in a hash gives each one a field whose value
-- starts with the entry's expiry on the server's clock, `<expiry ms>[:...]`, so that each holder
-- has a lease of its own (semaphore permits, readers and the writer of a read-write lock, and
-- waiting readers and writers). Prepended to the scripts that read such entries.

-- The expiry (server milliseconds) at the head of a holder entry `expiry[:...]`.
local function expiry_of(value)
  return tonumber(string.match(value, '^(%d+)')) or 0
end
