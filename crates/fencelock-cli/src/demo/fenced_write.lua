-- The protected resource of `fencelock demo`: a hash that remembers the highest fence it has
-- seen and refuses any write that carries a smaller one. This is the documented fencing pattern
-- for a resource that lives in Redis (in SQL: UPDATE ... SET fence = $f WHERE ... AND fence <= $f).
--
-- KEYS[1]  the resource: a hash {fence, writer, value, accepted, refused}
-- KEYS[2]  the log of accepted writes: a list of "fence:writer", oldest first
-- ARGV[1]  the writer's fence (a decimal integer below 2^53)
-- ARGV[2]  the writer's id
-- ARGV[3]  the value to write
--
-- Reply: {1, fence, writer} when the write is accepted, or
--        {0, current fence, current writer} when it is refused (the resource is left unchanged
--        except for its refusal counter).
-- An equal fence is accepted: one holder may write several times.

local fence = tonumber(ARGV[1])
if not fence then
  return redis.error_reply('ERR fence must be a number')
end

local current = redis.call('HGET', KEYS[1], 'fence')
if current and fence < tonumber(current) then
  redis.call('HINCRBY', KEYS[1], 'refused', 1)
  return {0, current, redis.call('HGET', KEYS[1], 'writer') or ''}
end

redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'writer', ARGV[2], 'value', ARGV[3])
redis.call('HINCRBY', KEYS[1], 'accepted', 1)
redis.call('RPUSH', KEYS[2], ARGV[1] .. ':' .. ARGV[2])
return {1, ARGV[1], ARGV[2]}
