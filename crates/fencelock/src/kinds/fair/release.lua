-- Release the fair lock if this owner holds it, and/or take the caller out of the queue (a waiter
-- that gives up). A holder's release passes the lock to the waiter now at the head of the queue
-- (the only one that may take it): a new fence, a short lease, the claim (PASS_CLAIM_MS, or until
-- the head's place would have lapsed if that is sooner: a live head confirms the full lease
-- within it, a head that died since its last refresh costs no more), told with
-- `to:<token>:<fence>:<lapses>:<ends>`, followed by `:<token>` of the waiter behind it if there
-- is one (it tries again when the claim ends, as the plain lock's next in line does: a dead head
-- keeps the lock idle for the claim, not until the next waiter's refresh), on each one's own
-- channel (`publish_to`), so that the head sends no acquire. When the head changed otherwise (it
-- gave up), the new head is woken by its token; with nobody queued, every waiter.
-- KEYS[1] the lock key, KEYS[2] the fence key, KEYS[3] the queue, KEYS[4] the liveness set
-- ARGV[1] the owner token, ARGV[2] the release channel, ARGV[3] the fence (or '')
-- Reply: 1 the lock was released (or passed on), 0 it was not held by this owner
local value = redis.pcall('get', KEYS[1])
local held = fence_if_held(value, ARGV[1]) ~= nil
-- A queue key of another type is not ours: leave it (the acquire reports it).
local rank = redis.pcall('zrank', KEYS[3], ARGV[1])
local queued = type(rank) == 'number'
local changed = held or rank == 0
local alive_type = redis.call('type', KEYS[4]).ok
local queues_ok = redis.call('type', KEYS[3]).ok == 'zset'
  and (alive_type == 'zset' or alive_type == 'none')
local now = now_ms()
-- Reads above, the message next, the writes last (see the prelude).
local head, behind, lapses, last = nil, nil, nil, nil
if changed and queues_ok then
  head, behind = next_head(KEYS[3], KEYS[4], ARGV[1], now)
end
if held and head then
  -- The pass's fence is worked out before the message that names it (and a fence key that is
  -- not ours passes nothing: the head is woken, and its acquire reports it).
  lapses = tonumber(redis.call('zscore', KEYS[4], head))
  last = last_fence(KEYS[2])
end
if last then
  -- max(last + 1, clock), as `next_fence` gives, but written only after the message.
  local fence, text = clock_micros()
  if last + 1 > fence then
    text = int(last + 1)
  end
  -- The passed lease is a claim, as the plain lock's (kinds/plain/release.lua).
  local ends = math.min(lapses, now + PASS_CLAIM_MS)
  local message = WAKE_TO .. head .. ':' .. text .. ':' .. int(lapses) .. ':' .. int(ends)
  if behind then
    message = message .. ':' .. behind
  end
  publish_to(ARGV[2], message, head, behind)
  redis.call('set', KEYS[2], text)
  redis.call('set', KEYS[1], head .. ':' .. text, 'PX', int(ends - now))
  redis.call('zrem', KEYS[3], head)
  redis.call('zrem', KEYS[4], head)
elseif changed then
  if head then
    publish_to(ARGV[2], WAKE_TO .. head, head)
  else
    publish(ARGV[2], WAKE_ALL)
  end
end
if held and not last then
  raise_fence(KEYS[2], ARGV[3])
  redis.call('del', KEYS[1])
end
if queued then
  redis.call('zrem', KEYS[3], ARGV[1])
  redis.pcall('zrem', KEYS[4], ARGV[1])
end
if changed and queues_ok then
  drop_lapsed(KEYS[3], KEYS[4], now)
  live_head(KEYS[3], KEYS[4], nil)
end
if held then
  return 1
end
return 0
