-- The plain lock's value, `<owner token>:<fence>` with the lease as the key's TTL (the fair lock
-- holds its key the same way). Prepended to the scripts that read it.

-- The fence (as a string) in a plain or fair lock's value `<token>:<fence>` when `token` holds
-- it; nil otherwise (another holder, no value, or an error table from a pcall).
local function fence_if_held(value, token)
  if type(value) ~= 'string' then
    return nil
  end
  local mine = token .. ':'
  if string.sub(value, 1, #mine) == mine then
    return string.sub(value, #mine + 1)
  end
  return nil
end
