-- release: delete a lock held by a token and hand it to the next waiter.
-- KEYS[1] lock key, KEYS[2] queue, KEYS[3] fence counter, KEYS[4] waiter
-- deadlines, KEYS[5] waiters' requests (hash token -> "ttl\nowner"),
-- KEYS[6] watched mark.
-- ARGV[1] token, ARGV[2] (optional, '1' when absent) '1' to hand off.
-- The release channel is KEYS[1] .. ':released'.
-- When nobody queues and nobody watches (no watched mark: set by Watch
-- and by a single attempt that found the lock held), the release
-- publishes nothing: the fast path is GET, DEL and one EXISTS. When
-- nobody queues but the mark is set, the message goes to the release
-- channel, for non-queued waiters. When waiters queue, the lock goes straight to the
-- live waiter at the head of the queue (hand-off: the waiter needs no
-- round trip of its own), with a fresh fence, and the message
-- "g FENCE TIME" (server time in us) goes only to that waiter's own
-- channel (release channel:token). Without hand-off (ARGV[2] '0', for replica
-- sync, whose waiters must WAIT on their own grant) the head is told to
-- try with an empty message.
-- Returns 1 (released), 0 (gone already), -1 (another token holds it).
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
if string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. '\n' then
  return -1
end
redis.call('DEL', KEYS[1])
if redis.call('EXISTS', KEYS[2], KEYS[6]) == 0 then
  return 1
end
local ch = KEYS[1] .. ':released'
local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
if not head then
  redis.call('PUBLISH', ch, '')
  return 1
end
if (ARGV[2] or '1') ~= '1' then
  redis.call('PUBLISH', ch .. ':' .. head, '')
  return 1
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local dead = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', math.floor(now / 1000))
for _, w in ipairs(dead) do
  redis.call('ZREM', KEYS[2], w)
  redis.call('ZREM', KEYS[4], w)
  redis.call('HDEL', KEYS[5], w)
end
if #dead > 0 then
  head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
end
local ask = head and redis.call('HGET', KEYS[5], head)
if not ask then
  if head then
    redis.call('PUBLISH', ch .. ':' .. head, '')
  else
    redis.call('PUBLISH', ch, '')
  end
  return 1
end
local ttl, owner = string.match(ask, '^([^\n]*)\n(.*)$')
local us = t[1] .. string.sub('00000' .. t[2], -6)
local last = tonumber(redis.call('SET', KEYS[3], us, 'GET') or '0') or 0
local f = us
if last >= now then
  f = string.format('%.0f', last + 1)
  redis.call('SET', KEYS[3], f)
end
redis.call('SET', KEYS[1], head .. '\n' .. f .. '\n' .. owner, 'PX', ttl)
redis.call('ZREM', KEYS[2], head)
redis.call('ZREM', KEYS[4], head)
redis.call('HDEL', KEYS[5], head)
redis.call('PUBLISH', ch .. ':' .. head, 'g ' .. f .. ' ' .. us)
return 1
