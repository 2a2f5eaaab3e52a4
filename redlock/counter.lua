-- Prepended to every script that reads or writes fences. The node's fence
-- counter is KEYS[2]: one per node (one per hash slot when the node is a
-- Redis Cluster), shared by every name, so the state stays bounded however
-- many names are used. Versions before it kept one counter per name
-- (KEYS[1] .. ':fence', never expiring): fencecounter folds such a key
-- into the node's counter (which becomes the larger of the two) and
-- deletes it, so no name's fence ever goes back across the upgrade. That
-- key shares the lock key's hash slot but is not passed in KEYS: one more
-- argument would take EVALSHA past the 10 that Redis accepts from a client
-- not yet authenticated, turning NOAUTH into a protocol error.
-- Returns the counter's value, or false when the node has none yet.
local function fencecounter()
  local c = redis.call('GET', KEYS[2])
  local legacy = KEYS[1] .. ':fence'
  local old = redis.call('GET', legacy)
  if old then
    if not c or (tonumber(old) or 0) > (tonumber(c) or 0) then
      c = old
      redis.call('SET', KEYS[2], c)
    end
    redis.call('DEL', legacy)
  end
  return c
end
