-- The semaphore's hash: these fields, plus one 'p:<permit token>' = '<expiry ms>:<fence>' per
-- permit held.
local SEMAPHORE_FIELDS = {'kind', 'permits'}
