-- Read a lock's state, of any kind, without changing it.
-- KEYS[1] the lock key, KEYS[2] the fence key, KEYS[3] the fair lock's queue, KEYS[4] its
-- liveness set, KEYS[5] the plain lock's line of waiters
-- Reply: {1, kind, last fence or '', detail or '', waiting, role1, token1, ms1, fence1,
--          label1, ...}
--          kind: 'free', 'lock' (plain or fair), 'reentrant', 'rw' or 'semaphore';
--          detail: a reentrant lock's hold count, a semaphore's N;
--          waiting: how many waiters follow the holders;
--          one (role, token, remaining ms (-1: no expiry), fence or '', label or '') per
--          holder, role being 'holder' (token: the owner's), 'writer', 'reader' or 'permit'
--          (token: the hold's); the label is the string at KEYS[1] .. ':label:<hold token>'
--          (a reentrant lock's: the first of its holds' that has one); holders whose lease
--          ran out are left out;
--          then one (role, token, waited ms (-1: not known), place) per waiter, in line order
--          (place 1 first), role being 'wait' (a plain lock's line, a fair lock's queue) or
--          'wait-writer' / 'wait-reader' (a read-write lock's waiting entries; token: the
--          hold's); places that lapsed are left out
--        {-1, key, type}   a key holds something that is not ours
local kind, err = kind_of(KEYS[1])
if err then
  return err
end
local fence = redis.pcall('get', KEYS[2])
if type(fence) == 'table' then
  return {-1, KEYS[2], redis.call('type', KEYS[2]).ok}
end
local reply = {1, kind, fence or '', '', 0}
local now = now_ms()

-- Appends one waiter to the reply, `place` after those already there.
local function add_waiter(role, token, waited)
  reply[5] = reply[5] + 1
  table.insert(reply, role)
  table.insert(reply, token)
  table.insert(reply, waited)
  table.insert(reply, tostring(reply[5]))
end

-- The label a hold wrote beside the lock (`:label:<hold token>`), or '' (none, or not a
-- string).
local function label_of(token)
  local label = redis.pcall('get', KEYS[1] .. ':label:' .. token)
  if type(label) == 'string' then
    return label
  end
  return ''
end

-- Appends one holder to the reply, with its label.
local function add_holder(role, token, remaining, held, label)
  table.insert(reply, role)
  table.insert(reply, token)
  table.insert(reply, remaining)
  table.insert(reply, held)
  table.insert(reply, label)
end

-- A key's type when it is a sorted set (anything else is no line: the scripts that use it
-- report it).
local function is_zset(key)
  return redis.call('type', key).ok == 'zset'
end

-- The lines of a plain or fair lock (also while it is free: a holder's lease may have run out
-- before the first in line came back). The plain lock's line is in the order a release passes
-- it on, the soonest place to lapse first; it keeps no arrival time. The fair queue is in ticket
-- order; a ticket that is a server ms (from 10^12 on) is when its waiter arrived.
local function plain_and_fair_lines()
  if is_zset(KEYS[5]) then
    for _, token in ipairs(redis.call('zrangebyscore', KEYS[5], '(' .. int(now), '+inf')) do
      add_waiter('wait', token, -1)
    end
  end
  if is_zset(KEYS[3]) and is_zset(KEYS[4]) then
    local queue = redis.call('zrange', KEYS[3], 0, -1, 'WITHSCORES')
    for i = 1, #queue, 2 do
      local lapses = tonumber(redis.call('zscore', KEYS[4], queue[i]))
      if lapses and lapses > now then
        local ticket = tonumber(queue[i + 1]) or 0
        local waited = -1
        if ticket >= 1e12 and ticket <= now then
          waited = now - ticket
        end
        add_waiter('wait', queue[i], waited)
      end
    end
  end
end

if kind == 'free' then
  plain_and_fair_lines()
elseif kind == 'lock' then
  local value = redis.call('get', KEYS[1])
  local token, held = string.match(value, '^(%x+):(%d+)%+?$')
  add_holder('holder', token, redis.call('pttl', KEYS[1]), held, label_of(token))
  plain_and_fair_lines()
elseif kind == 'reentrant' then
  reply[4] = tostring(hold_count(KEYS[1]))
  -- (HGETALL, not HKEYS: the commands of docs/deployments.md's ACL rules.)
  local label = ''
  local all = redis.call('hgetall', KEYS[1])
  for i = 1, #all, 2 do
    local hold = string.match(all[i], '^h:(%x+)$')
    if hold and label == '' then
      label = label_of(hold)
    end
  end
  add_holder('holder', redis.call('hget', KEYS[1], 'owner') or '', redis.call('pttl', KEYS[1]),
    redis.call('hget', KEYS[1], 'fence') or '', label)
elseif kind == 'rw' or kind == 'semaphore' then
  reply[4] = redis.call('hget', KEYS[1], 'permits') or ''
  local all = redis.call('hgetall', KEYS[1])
  local waiters = {}
  for i = 1, #all, 2 do
    -- (A semaphore's hold of k permits is k fields: `p:<token>`, `p:<token>/2`, ...)
    local role, id = string.match(all[i], '^(%a):(%x+)')
    local remaining = expiry_of(all[i + 1]) - now
    if role and remaining > 0 then
      if role == 'i' or role == 'q' or (role == 'w' and kind == 'semaphore') then
        -- A waiting entry is `<expiry ms>:<arrival ms>` (0: none known); a semaphore's,
        -- `<expiry ms>:<k>:<arrival ms>`.
        local arrival = tonumber(string.match(all[i + 1], ':(%d+)$')) or 0
        table.insert(waiters, {role, id, arrival})
      else
        local names = {r = 'reader', w = 'writer', p = 'permit'}
        -- A writer's and a permit's value end with their fence; a reader's ends with its
        -- owner's token, which may be all digits: a reader shows no fence.
        local fence = role ~= 'r' and string.match(all[i + 1], ':(%d+)$') or ''
        add_holder(names[role] or role, id, remaining, fence, label_of(id))
      end
    end
  end
  -- Waiters take turns by arrival (a phase at a time: see kinds/rwlock/scan.lua).
  table.sort(waiters, function(a, b)
    if a[3] ~= b[3] then
      return a[3] < b[3]
    end
    return a[2] < b[2]
  end)
  for _, waiter in ipairs(waiters) do
    local waited = -1
    if waiter[3] > 0 and waiter[3] <= now then
      waited = now - waiter[3]
    end
    local role = 'wait-reader'
    if waiter[1] == 'i' then
      role = 'wait-writer'
    elseif waiter[1] == 'w' then
      role = 'wait'
    end
    add_waiter(role, waiter[2], waited)
  end
end
return reply
