-- Take one permit of a counting semaphore. The semaphore is a hash: kind = 'semaphore',
-- permits = N, and one field 'p:<token>' = '<expiry ms>:<fence>' per permit held. Each permit is
-- a lease of its own: a holder that stops renewing loses its permit when its expiry passes, and
-- the next acquire drops it. The key's TTL is the latest expiry, so an idle semaphore vanishes.
-- KEYS[1] the semaphore key, KEYS[2] the fence key
-- ARGV[1] the permit token, ARGV[2] the lease in milliseconds, ARGV[3] N
-- Reply: fence (granted) | {0, ms until the first permit's lease runs out} | {-1, key, type}
--        | {-2, 'kind', k} | {-2, 'permits', stored N} (the holders use another N)
local err = refuse_other_kind(KEYS[1], 'semaphore')
if err then
  return err
end
local now = now_ms()
local ttl = tonumber(ARGV[2])
local field = 'p:' .. ARGV[1]
local mine = redis.call('hget', KEYS[1], field)
if mine and expiry_of(mine) > now then
  local fence = string.match(mine, ':(%d+)$')
  redis.call('hset', KEYS[1], field, int(now + ttl) .. ':' .. fence)
  keep_for(KEYS[1], ttl)
  return tonumber(fence)
end
local permits = tonumber(ARGV[3])
local entries = redis.call('hlen', KEYS[1])
if entries > 0 then
  local stored = redis.call('hget', KEYS[1], 'permits')
  if entries - #SEMAPHORE_FIELDS >= permits or stored ~= ARGV[3] then
    -- Count the live permits, dropping those whose lease ran out.
    local held, soonest = 0, nil
    local all = redis.call('hgetall', KEYS[1])
    for i = 1, #all, 2 do
      if string.sub(all[i], 1, 2) == 'p:' then
        local expiry = expiry_of(all[i + 1])
        if expiry <= now then
          redis.call('hdel', KEYS[1], all[i])
        else
          held = held + 1
          if not soonest or expiry < soonest then
            soonest = expiry
          end
        end
      end
    end
    if held > 0 and stored ~= ARGV[3] then
      return {-2, 'permits', stored or '?'}
    end
    if held >= permits then
      return {0, soonest - now}
    end
  end
end
local last, ferr = last_fence(KEYS[2])
if ferr then
  return ferr
end
local fence, text = next_fence(KEYS[2], last)
redis.call('hset', KEYS[1], 'kind', 'semaphore', 'permits', ARGV[3], field, int(now + ttl) .. ':' .. text)
keep_for(KEYS[1], ttl)
return fence
