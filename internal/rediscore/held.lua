-- The token check, prepended to every script that changes a lock only for
-- its holder. A lock's value is "token\nfence\nowner"; a Redlock token is
-- "token/attempt".

-- held reports whether lock value v belongs to the holder named by mark,
-- the start of that holder's values (Mark): "token\n" for one token (or
-- one attempt of a Redlock token, "token/attempt\n"), "token/" for every
-- attempt of a Redlock token.
local function held(v, mark)
  return string.sub(v, 1, #mark) == mark
end

-- heldValue reads the lock at key for the holder named by mark: its value
-- when that holder holds it, else nil and the code the scripts answer
-- for it: 0 gone (expired or deleted), -1 another token holds it.
local function heldValue(key, mark)
  local v = redis.call('GET', key)
  if not v then
    return nil, 0
  end
  if not held(v, mark) then
    return nil, -1
  end
  return v
end
