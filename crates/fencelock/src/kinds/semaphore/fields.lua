-- The semaphore's hash: these fields, plus the permits held and the requests waiting.
--   'p:<token>' = '<expiry ms>:<fence>': a hold of one permit; a hold of k permits is k fields,
--     'p:<token>', 'p:<token>/2', ..., 'p:<token>/k', with one value (one lease, one fence);
--   'w:<token>' = '<expiry ms>:<k>:<arrival ms>': a request waiting for k permits, its place
--     lapsing at its expiry unless refreshed. Permits go first come, first served: a request is
--     granted only when its k permits are free after those of every request that waits longer.
local SEMAPHORE_FIELDS = {'kind', 'permits'}

-- The fields of a hold of `k` permits by `token`.
local function permit_fields(token, k)
  local fields = {'p:' .. token}
  for i = 2, k do
    fields[i] = 'p:' .. token .. '/' .. i
  end
  return fields
end
