-- acquire: take a lock and issue its fencing token in one atomic step,
-- respecting the FIFO queue of waiters.
-- KEYS[1] lock, KEYS[2] fence counter (one per server, or per Cluster
-- slot), KEYS[3] queue (zset token -> arrival in us), KEYS[4] waiter
-- deadlines (zset token -> ms), KEYS[5] the name's legacy fence counter,
-- KEYS[6] queued waiters' requests (hash token -> "ttl\nowner", for the
-- release's hand-off), KEYS[7] the watched mark (see below); one hash slot.
-- ARGV[1] token, ARGV[2] TTL in ms, ARGV[3] owner, ARGV[4] (optional:
-- absent for 0) the TTL of the caller's place in the queue, in ms: 0 for
-- a single attempt, else the caller queues (or stays queued) when it is
-- not granted, and must come back within that TTL. ARGV[5]
-- (optional, ms, 0 for none) is what is left of the caller's wait: its
-- place lapses then even if its TTL runs longer, so that a release never
-- hands the lock to a waiter whose deadline has passed (its own dequeue
-- may still be on its way). ARGV[6] (optional, Unix ms, 0 for none) is
-- the caller's deadline on the server's clock (its deadline plus the skew
-- of its clock that its last reply showed, rounded down): the place lapses
-- then if that is sooner, since what is left counts from the script's
-- run, which is later than the caller's send by the request's latency.
-- An attempt that runs at or after that deadline reached the server after
-- its caller gave up (a slow link, a client descheduled between its
-- deadline check and the write, a server backlog): it takes nothing and
-- leaves the queue, and a lock handed to the caller meanwhile is freed,
-- as the caller's own dequeue would do later. Granted, it would hold the
-- lock for nobody, for a whole TTL if that dequeue came first. ARGV[7] (optional,
-- us, 0 for none) is when the caller first queued (the server time of its
-- first attempt): a caller that is not queued (its place was dropped
-- while it was alive: a hand-off it confirmed after the hand-off lease
-- ran out, or a pause longer than its place's TTL) rejoins at that place,
-- not at the tail. ARGV[8] (optional, '' for none) is the inbox of the
-- caller's Locker: the channel on which it is told, with its token, of a
-- hand-off or its turn to try (tell), recorded with its request in the
-- asks hash when it queues; without one, it is told on its own channel.
-- The lock's value is "token\nfence\nowner".
-- A single attempt (ARGV[4] 0) that finds the lock held sets the watched
-- mark for 30 s: while it is set, the release publishes on the release
-- channel, for the waiters that poll with single attempts (and Watch sets
-- it too); with no mark and no queue the release publishes nothing.
-- Returns {1, fence, server time in us} when ARGV[1] holds the lock (now,
-- or already: a retry whose first reply was lost; its TTL is then renewed),
-- else {0, fence, owner, pttl, server time} describing the holder, with
-- pttl -2 when the lock is free but reserved for the head of the queue,
-- -3 when the attempt came after its caller's deadline (above).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
-- The same as a decimal string, without string.format (which costs more
-- than any other step of the fast path).
local us = t[1] .. string.sub('00000' .. t[2], -6)

local deadline = tonumber(ARGV[6] or '0') or 0
if deadline > 0 and now >= deadline * 1000 then
  redis.call('ZREM', KEYS[3], ARGV[1])
  redis.call('ZREM', KEYS[4], ARGV[1])
  redis.call('HDEL', KEYS[6], ARGV[1], ARGV[1] .. '\n')
  local v = redis.call('GET', KEYS[1])
  if v then
    local holder, fence, owner = string.match(v, '^([^\n]*)\n([^\n]*)\n(.*)$')
    if holder ~= ARGV[1] then
      return {0, fence or '0', owner or '', redis.call('PTTL', KEYS[1]), us}
    end
    redis.call('DEL', KEYS[1])
    local head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
    if head then
      tell(KEYS[1] .. ':released', head, '', inboxOf(KEYS[6], head))
    end
  end
  return {0, '0', 'nobody (free; this attempt reached the server after its deadline)', -3, us}
end

-- Fast path: no lock, nobody queued, no legacy counter: four calls in
-- all. The fence is max(counter + 1, server clock in us); SET ... GET
-- raises the counter to the clock and returns its old value in one call,
-- and only a counter at or past the clock (a clock step back, or two
-- grants in one microsecond) costs a second SET.
if redis.call('EXISTS', KEYS[1], KEYS[3], KEYS[5]) == 0 then
  local f = us
  local last = tonumber(redis.call('SET', KEYS[2], us, 'GET') or '0') or 0
  if last >= now then
    f = string.format('%.0f', last + 1)
    redis.call('SET', KEYS[2], f)
  end
  redis.call('SET', KEYS[1], ARGV[1] .. '\n' .. f .. '\n' .. ARGV[3], 'PX', ARGV[2])
  return {1, f, us}
end

-- The same with the name's legacy counter folded in.
local function grant(legacy)
  local last = tonumber(redis.call('SET', KEYS[2], us, 'GET') or '0') or 0
  local fence = math.max(now, last + 1, legacy + 1)
  local f = string.format('%.0f', fence)
  if fence ~= now then
    redis.call('SET', KEYS[2], f)
  end
  redis.call('SET', KEYS[1], ARGV[1] .. '\n' .. f .. '\n' .. ARGV[3], 'PX', ARGV[2])
  return {1, f, us}
end

local tok, placettl = ARGV[1], tonumber(ARGV[4] or '0') or 0
local stay = placettl
local budget = tonumber(ARGV[5] or '0') or 0
if budget > 0 and budget < stay then
  stay = budget
end
local nowms = math.floor(now / 1000)
local lapse = nowms + stay
if deadline > 0 and deadline < lapse then
  lapse = deadline
end
local rejoin = tonumber(ARGV[7] or '0') or 0
local arrival = us
if rejoin > 0 then
  arrival = ARGV[7]
end
local inbox = ARGV[8] or ''
local function enqueue()
  if placettl > 0 then
    redis.call('ZADD', KEYS[3], 'NX', arrival, tok)
    redis.call('ZADD', KEYS[4], lapse, tok)
    if inbox ~= '' then
      redis.call('HSET', KEYS[6], tok, ARGV[2] .. '\n' .. ARGV[3], tok .. '\n', inbox)
    else
      redis.call('HSET', KEYS[6], tok, ARGV[2] .. '\n' .. ARGV[3])
    end
    redis.call('PEXPIRE', KEYS[3], 2 * placettl)
    redis.call('PEXPIRE', KEYS[4], 2 * placettl)
    redis.call('PEXPIRE', KEYS[6], 2 * placettl)
  end
end

local v = redis.call('GET', KEYS[1])
if v then
  local holder, fence, owner = string.match(v, '^([^\n]*)\n([^\n]*)\n(.*)$')
  if holder == tok then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {1, fence, us}
  end
  if placettl > 0 then
    enqueue()
  else
    redis.call('SET', KEYS[7], '1', 'PX', 30000)
  end
  return {0, fence or '0', owner or '', redis.call('PTTL', KEYS[1]), us}
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  local dead = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', nowms)
  for _, w in ipairs(dead) do
    redis.call('ZREM', KEYS[3], w)
    redis.call('ZREM', KEYS[4], w)
    redis.call('HDEL', KEYS[6], w, w .. '\n')
  end
  local first = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
  local head = first[1]
  -- A caller that arrived before the head is not queued (a queued
  -- caller's score is its arrival, never below the head's): its place was
  -- dropped while it was alive, and it takes its turn now.
  if head and head ~= tok and not (rejoin > 0 and rejoin < tonumber(first[2])) then
    enqueue()
    return {0, '0', 'nobody (free, reserved for the next queued waiter)', -2, us}
  end
  redis.call('ZREM', KEYS[3], tok)
  redis.call('ZREM', KEYS[4], tok)
  redis.call('HDEL', KEYS[6], tok, tok .. '\n')
end
-- Migration from the per-name counters of older versions: fold the
-- name's counter into the fence, then drop it.
local legacy = tonumber(redis.call('GET', KEYS[5]) or '0') or 0
if legacy > 0 then
  redis.call('DEL', KEYS[5])
end
return grant(legacy)
