-- Reads the leader of an election: the record, if the lock is held with the record's term (a
-- leader whose lease ran out, or whose successor has not announced itself yet, is no leader).
--
-- KEYS[1] the election's lock key; KEYS[2] its leader record.
-- Replies: {1, term, since ms, value, ms left of the lock's lease}; {0} no leader;
-- {-1, key, type} a foreign key. (The lease tells an observer when to look again: a leader
-- whose lease runs out without resigning announces nothing.)
local term, refusal = holder_term(KEYS[1])
if term == nil then
  return refusal
end
if not term then
  return {0}
end
local record = redis.pcall('hmget', KEYS[2], 'term', 'since', 'value')
if record.err then
  return {-1, KEYS[2], redis.call('type', KEYS[2]).ok}
end
if record[1] ~= term or not record[2] or not record[3] then
  return {0}
end
return {1, record[1], record[2], record[3], redis.call('pttl', KEYS[1])}
