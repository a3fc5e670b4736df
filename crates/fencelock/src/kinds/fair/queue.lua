-- The fair lock's queue, prepended to its scripts.

-- The fair lock's queue (`queue`: token -> ticket) and its liveness set (`alive`: token -> the
-- server ms its place lapses at). Takes out every place that lapsed by `now`.
local function drop_lapsed(queue, alive, now)
  local lapsed = redis.call('zrangebyscore', alive, '-inf', now)
  for _, token in ipairs(lapsed) do
    redis.call('zrem', queue, token)
    redis.call('zrem', alive, token)
  end
end

-- The token at the head of the fair lock's queue, or nil for an empty queue. A place at the head
-- with no liveness entry (left by an eviction, or by anything that wrote one set and not the
-- other) could never lapse and would block the queue for good: it is taken out, unless it is
-- `keep`'s (a caller that has just queued and writes its liveness entry next).
local function live_head(queue, alive, keep)
  local head = redis.call('zrange', queue, 0, 0)[1]
  while head and head ~= keep and not redis.call('zscore', alive, head) do
    redis.call('zrem', queue, head)
    head = redis.call('zrange', queue, 0, 0)[1]
  end
  return head
end

-- The token that will head the queue once `skip` has left and every lapsed place is gone (the
-- first place, other than `skip`'s, whose liveness entry lapses after `now`), and the one that
-- will be behind it (the second such place); nil for none. Reads only: a release publishes
-- their names before it writes anything.
local function next_head(queue, alive, skip, now)
  local start, head = 0, nil
  while true do
    local page = redis.call('zrange', queue, start, start + 15)
    if #page == 0 then
      return head, nil
    end
    for _, token in ipairs(page) do
      local lapses = redis.call('zscore', alive, token)
      if token ~= skip and lapses and tonumber(lapses) > now then
        if head then
          return head, token
        end
        head = token
      end
    end
    start = start + 16
  end
end
