-- Resigns a leadership before its lock is released: publishes `resigned:<term>` and deletes the
-- record, only if the lock is still held with this term.
--
-- KEYS[1] the election's lock key; KEYS[2] its leader record. ARGV[1] the term.
-- Replies: 1 resigned; 0 not the leader (nothing changed); {-1, key, type} a foreign key.
local term, refusal = holder_term(KEYS[1])
if term == nil then
  return refusal
end
if term ~= ARGV[1] then
  return 0
end
publish(KEYS[1] .. ':announce', 'resigned:' .. ARGV[1])
redis.call('del', KEYS[2])
return 1
