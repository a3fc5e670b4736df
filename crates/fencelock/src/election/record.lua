-- The leader's record outlives the lease of the term it names by a second: every script that
-- sets the lease (a grant, a renewal) or writes the record (a proclaim) sets the record's expiry
-- to that lease plus the margin, so that while the lock holds a term its record is there, and a
-- leader that lapsed without resigning leaves no key behind.
local function keep_record(record, lease_ms)
  redis.call('pexpire', record, int(tonumber(lease_ms) + 1000))
end
