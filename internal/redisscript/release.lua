-- release: delete a lock held by a token and wake the next waiter.
-- KEYS[1] lock key, KEYS[2] queue. ARGV[1] token, ARGV[2] release channel.
-- When waiters queue, the message goes only to the head's own channel
-- (ARGV[2]:token): only that waiter needs to try, which keeps handoffs
-- first-come first-served and wakes no other process.
-- Returns 1 (released), 0 (gone already), -1 (another token holds it).
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
if string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. '\n' then
  return -1
end
redis.call('DEL', KEYS[1])
local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
if head then
  redis.call('PUBLISH', ARGV[2] .. ':' .. head, '')
else
  redis.call('PUBLISH', ARGV[2], '')
end
return 1
