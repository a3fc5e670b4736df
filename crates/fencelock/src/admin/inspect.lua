-- Read a lock's state, of any kind, without changing it.
-- KEYS[1] the lock key, KEYS[2] the fence key, KEYS[3] the fair lock's queue
-- Reply: {1, kind, last fence or '', detail or '', waiting, role1, token1, remaining1, fence1, ...}
--          kind: 'free', 'lock' (plain or fair), 'reentrant', 'rw' or 'semaphore';
--          detail: a reentrant lock's hold count, a semaphore's N;
--          waiting: queued fair-lock waiters, or a read-write lock's waiting readers and writers;
--          one (role, token, remaining ms (-1: no expiry), fence or '') per holder, role being
--          'holder' (token: the owner's), 'writer', 'reader' or 'permit' (token: the hold's);
--          holders whose lease ran out are left out
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
if kind == 'lock' then
  local value = redis.call('get', KEYS[1])
  local token, held = string.match(value, '^(%x+):(%d+)%+?$')
  table.insert(reply, 'holder')
  table.insert(reply, token)
  table.insert(reply, redis.call('pttl', KEYS[1]))
  table.insert(reply, held)
  if redis.call('type', KEYS[3]).ok == 'zset' then
    reply[5] = redis.call('zcard', KEYS[3])
  end
elseif kind == 'reentrant' then
  reply[4] = tostring(hold_count(KEYS[1]))
  table.insert(reply, 'holder')
  table.insert(reply, redis.call('hget', KEYS[1], 'owner') or '')
  table.insert(reply, redis.call('pttl', KEYS[1]))
  table.insert(reply, redis.call('hget', KEYS[1], 'fence') or '')
elseif kind == 'rw' or kind == 'semaphore' then
  reply[4] = redis.call('hget', KEYS[1], 'permits') or ''
  local now = now_ms()
  local all = redis.call('hgetall', KEYS[1])
  for i = 1, #all, 2 do
    local role, id = string.match(all[i], '^(%a):(%x+)$')
    local remaining = expiry_of(all[i + 1]) - now
    if role and remaining > 0 then
      if role == 'i' or role == 'q' then
        reply[5] = reply[5] + 1
      else
        local names = {r = 'reader', w = 'writer', p = 'permit'}
        table.insert(reply, names[role] or role)
        table.insert(reply, id)
        table.insert(reply, remaining)
        -- A writer's and a permit's value end with their fence; a reader's ends with its
        -- owner's token, which may be all digits: a reader shows no fence.
        local fence = role ~= 'r' and string.match(all[i + 1], ':(%d+)$') or ''
        table.insert(reply, fence)
      end
    end
  end
end
return reply
