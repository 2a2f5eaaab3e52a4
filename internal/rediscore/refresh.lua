-- refresh: extend a lock held by a token; never re-create it.
-- KEYS[1] lock key. ARGV[1] token, ARGV[2] TTL in ms.
-- Returns 1 (extended), 0 (gone: expired or deleted), -1 (another token).
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
if string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. '\n' then
  return -1
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
