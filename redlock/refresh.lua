-- refresh: extend a lock held by a token (any attempt of it); never
-- re-create a missing one.
-- KEYS[1] lock key. ARGV[1] token, ARGV[2] TTL in ms.
-- Returns 1 (extended), 0 (gone), -1 (another token holds it).
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
if string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. '/' then
  return -1
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
