-- Take k permits of a counting semaphore (see fields.lua), with one lease and one fence. Each
-- hold is a lease of its own: a holder that stops renewing loses its permits when its expiry
-- passes, and the next acquire drops them. The key's TTL is the latest expiry, so an idle
-- semaphore vanishes.
-- KEYS[1] the semaphore key, KEYS[2] the fence key
-- ARGV[1] the hold's token, ARGV[2] the lease in milliseconds, ARGV[3] N, ARGV[4] k (absent: 1),
-- or for a request that waits `<k>:<place ms>` (how long its place lasts without a refresh)
-- Reply: fence (granted) | {0, ms until a permit's lease runs out (or 0: wait for a release)}
--        | {-1, key, type} | {-2, 'kind', k} | {-2, 'permits', stored N} (the holders use
--        another N)
local err = refuse_other_kind(KEYS[1], 'semaphore')
if err then
  return err
end
local now = now_ms()
local ttl = tonumber(ARGV[2])
local k, place = 1, 0
if ARGV[4] then
  local wants, lasts = string.match(ARGV[4], '^(%d+):?(%d*)$')
  k = tonumber(wants) or 1
  place = tonumber(lasts) or 0
end
local field = 'p:' .. ARGV[1]
local waiting = 'w:' .. ARGV[1]
local mine = redis.call('hget', KEYS[1], field)
if mine and expiry_of(mine) > now then
  -- Held by this token already (a retry after a lost reply): re-armed.
  local fence = string.match(mine, ':(%d+)$')
  local value = int(now + ttl) .. ':' .. fence
  for _, f in ipairs(permit_fields(ARGV[1], k)) do
    redis.call('hset', KEYS[1], f, value)
  end
  keep_for(KEYS[1], ttl)
  return tonumber(fence)
end
local permits = tonumber(ARGV[3])
local entries = redis.call('hlen', KEYS[1])
if entries > 0 then
  local stored = redis.call('hget', KEYS[1], 'permits')
  -- The permits held, and the requests that wait longer than this one (a request that has
  -- no place yet is behind all of them), dropping what lapsed.
  local held, soonest, ahead, arrival = 0, nil, 0, nil
  local all = redis.call('hgetall', KEYS[1])
  local queue = {}
  for i = 1, #all, 2 do
    local prefix = string.sub(all[i], 1, 2)
    if prefix == 'p:' or prefix == 'w:' then
      local expiry = expiry_of(all[i + 1])
      if expiry <= now then
        redis.call('hdel', KEYS[1], all[i])
      elseif prefix == 'p:' then
        held = held + 1
        if not soonest or expiry < soonest then
          soonest = expiry
        end
      elseif all[i] == waiting then
        arrival = tonumber(string.match(all[i + 1], ':(%d+)$'))
      else
        local wants, since = string.match(all[i + 1], '^%d+:(%d+):(%d+)$')
        queue[#queue + 1] = {tonumber(since), string.sub(all[i], 3), tonumber(wants)}
      end
    end
  end
  if held > 0 and stored ~= ARGV[3] then
    return {-2, 'permits', stored or '?'}
  end
  for _, w in ipairs(queue) do
    if not arrival or w[1] < arrival or (w[1] == arrival and w[2] < ARGV[1]) then
      ahead = ahead + (w[3] or 1)
    end
  end
  if held + ahead + k > permits then
    if place > 0 then
      -- Take or refresh this request's place (its arrival kept).
      redis.call('hset', KEYS[1], waiting, int(now + place) .. ':' .. k .. ':' .. int(arrival or now))
      keep_for(KEYS[1], place)
    end
    -- Until the first permit's lease runs out; with the permits free but kept for requests
    -- that wait longer, until a release wakes this one (or its place's refresh).
    if soonest then
      return {0, soonest - now}
    end
    return {0, math.max(place, 1000)}
  end
end
local last, ferr = last_fence(KEYS[2])
if ferr then
  return ferr
end
local fence, text = next_fence(KEYS[2], last)
local value = int(now + ttl) .. ':' .. text
local args = {'kind', 'semaphore', 'permits', ARGV[3]}
for _, f in ipairs(permit_fields(ARGV[1], k)) do
  args[#args + 1] = f
  args[#args + 1] = value
end
redis.call('hset', KEYS[1], unpack(args))
redis.call('hdel', KEYS[1], waiting)
keep_for(KEYS[1], ttl)
return fence
