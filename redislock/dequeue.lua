-- dequeue: a waiter gives up its place in the queue.
-- KEYS[1] lock, KEYS[2] queue, KEYS[3] waiter deadlines, KEYS[4] waiters'
-- requests. ARGV[1] token, ARGV[2] release channel.
-- A lock handed to this waiter meanwhile (its release raced the giving
-- up) is freed. If the lock is free, the new head of the queue is told to
-- try (tell). held is the token check of internal/rediscore/held.lua,
-- prepended.
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1], ARGV[1] .. '\n')
local v = redis.call('GET', KEYS[1])
if v and held(v, ARGV[1] .. '\n') then
  redis.call('DEL', KEYS[1])
  v = nil
end
if not v then
  local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  if head then
    tell(ARGV[2], head, '', inboxOf(KEYS[4], head))
  end
end
return 1
