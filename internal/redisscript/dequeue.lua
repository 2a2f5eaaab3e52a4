-- dequeue: a waiter gives up its place in the queue.
-- KEYS[1] lock, KEYS[2] queue, KEYS[3] waiter deadlines.
-- ARGV[1] token, ARGV[2] release channel.
-- If the lock is free, the new head of the queue is told to try, on its
-- own channel (ARGV[2]:token).
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then
  local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  if head then
    redis.call('PUBLISH', ARGV[2] .. ':' .. head, '')
  end
end
return 1
