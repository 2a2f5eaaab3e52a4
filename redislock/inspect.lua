-- inspect: the holder of a lock. KEYS[1] lock key.
-- Returns {value, pttl}, or false when the lock is free.
local v = redis.call('GET', KEYS[1])
if not v then
  return false
end
return {v, redis.call('PTTL', KEYS[1])}
