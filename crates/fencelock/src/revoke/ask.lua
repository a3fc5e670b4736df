-- Asks the holders of a lock to let go (polite revocation): records the last fence handed out,
-- so that every hold with a fence up to it counts as asked and later grants do not, and wakes
-- the holders that listen. Takes nothing from anyone.
-- KEYS[1] the lock key, KEYS[2] its fence key, KEYS[3] the request key; ARGV[1] the request
-- channel
-- Reply: 1 asked, 0 the lock is free or its lease ends within the millisecond (nothing
-- recorded: `SET ... PX 0` would be refused)
local lasts = redis.call('pttl', KEYS[1])
if lasts <= 0 then
  return 0
end
publish(ARGV[1], WAKE_ALL)
local fence = redis.call('get', KEYS[2]) or '0'
-- It lasts as long as the current hold may: a later grant never sees it.
redis.call('set', KEYS[3], fence, 'px', lasts)
return 1
