-- acquire: take a lock and issue its fencing token in one atomic step,
-- respecting the FIFO queue of waiters.
-- KEYS[1] lock, KEYS[2] fence counter, KEYS[3] queue (zset token -> arrival
-- in us), KEYS[4] waiter deadlines (zset token -> ms); one hash slot.
-- ARGV[1] token, ARGV[2] TTL in ms, ARGV[3] owner, ARGV[4] waiter lease in
-- ms: 0 for a single attempt, else the caller queues (or stays queued)
-- when it is not granted, and must come back within that lease.
-- The lock's value is "token\nfence\nowner".
-- Returns {1, fence} when ARGV[1] holds the lock (now, or already: a retry
-- whose first reply was lost; its TTL is then renewed), else
-- {0, fence, owner, pttl} describing the holder, with pttl -2 when the lock
-- is free but reserved for the waiter at the head of the queue.
local tok, lease = ARGV[1], tonumber(ARGV[4])
local t = redis.call('TIME')
local nowms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function enqueue()
  if lease > 0 then
    redis.call('ZADD', KEYS[3], 'NX', tonumber(t[1]) * 1000000 + tonumber(t[2]), tok)
    redis.call('ZADD', KEYS[4], nowms + lease, tok)
    redis.call('PEXPIRE', KEYS[3], 2 * lease)
    redis.call('PEXPIRE', KEYS[4], 2 * lease)
  end
end

-- Fast path: no lock and nobody queued (one call tells both).
if redis.call('EXISTS', KEYS[1], KEYS[3]) > 0 then
  local v = redis.call('GET', KEYS[1])
  if v then
    local holder, fence, owner = string.match(v, '^([^\n]*)\n([^\n]*)\n(.*)$')
    if holder == tok then
      redis.call('PEXPIRE', KEYS[1], ARGV[2])
      return {1, fence}
    end
    enqueue()
    return {0, fence or '0', owner or '', redis.call('PTTL', KEYS[1])}
  end
  local dead = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', nowms)
  for _, w in ipairs(dead) do
    redis.call('ZREM', KEYS[3], w)
    redis.call('ZREM', KEYS[4], w)
  end
  local head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
  if head and head ~= tok then
    enqueue()
    return {0, '0', 'nobody (free, reserved for the next queued waiter)', -2}
  end
  redis.call('ZREM', KEYS[3], tok)
  redis.call('ZREM', KEYS[4], tok)
end

-- The fence is max(last + 1, server clock in microseconds): strictly
-- increasing while the counter survives, and still above every earlier
-- fence if it was lost or rolled back (as long as the server clock does
-- not go backwards and grants come less than once per microsecond).
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local last = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
local fence = string.format('%.0f', math.max(last + 1, now))
redis.call('SET', KEYS[2], fence)
redis.call('SET', KEYS[1], tok .. '\n' .. fence .. '\n' .. ARGV[3], 'PX', ARGV[2])
return {1, fence}
