-- Announces the leader of an election: writes its record beside the lock and publishes it, only
-- if the lock is held with this term (a deposed leader, whose lock lapsed or passed to another,
-- changes nothing). Used when a campaign is won and for each proclaim: within one term the
-- record keeps the time the term began.
--
-- KEYS[1] the election's lock key; KEYS[2] its leader record (KEYS[1] .. ':leader').
-- ARGV[1] the term (the lock's fence, decimal); ARGV[2] the leader's value.
-- The announcement goes to KEYS[1] .. ':announce' (same hash tag): `leader:<term>:<since>:<value>`.
-- Replies: {1, since ms} announced; {0, the holder's term or ''} not the leader;
-- {-1, key, type} a key that is not the election's.
local term, refusal = holder_term(KEYS[1])
if term == nil then
  return refusal
end
if term ~= ARGV[1] then
  return {0, term or ''}
end
local record = redis.pcall('hmget', KEYS[2], 'term', 'since')
if record.err then
  return {-1, KEYS[2], redis.call('type', KEYS[2]).ok}
end
local since = record[2]
if record[1] ~= ARGV[1] or not since then
  since = int(now_ms())
end
publish(KEYS[1] .. ':announce', 'leader:' .. ARGV[1] .. ':' .. since .. ':' .. ARGV[2])
redis.call('hset', KEYS[2], 'term', ARGV[1], 'since', since, 'value', ARGV[2])
-- A lock in its last millisecond (PTTL 0) still holds its term: the record it may just have
-- written anew lapses a second later all the same. (A lock the campaign wrote always expires:
-- PTTL is never -1 here, nor -2, since the lock holds this term.)
local lease = redis.call('pttl', KEYS[1])
if lease >= 0 then
  keep_record(KEYS[2], lease)
end
return {1, since}
