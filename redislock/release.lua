-- release: delete locks held by tokens, and hand each one to the next
-- waiter of its queue, provisionally. One lock, or many in one call (one
-- hash slot in a Cluster).
-- KEYS[1] fence counter; then five keys per lock, for lock i at
-- k = 5 * (i - 1) + 1: KEYS[k+1] lock, KEYS[k+2] queue (zset token ->
-- arrival in us), KEYS[k+3] waiter deadlines (zset token -> ms),
-- KEYS[k+4] waiters' requests (hash token -> "ttl\nowner", and
-- token .. "\n" -> the inbox of the waiter's Locker, when it named one),
-- KEYS[k+5] watched mark.
-- ARGV[1] hand-off lease in ms; ARGV[1+i] the mark of the holder
-- releasing lock i ("token\n").
-- A lock's release channel is its key .. ':released'.
-- When nobody queues and nobody watches (no watched mark: set by Watch
-- and by a single attempt that found the lock held), the release
-- publishes nothing: the fast path is GET, DEL and one EXISTS. When
-- nobody queues but the mark is set, the message goes to the release
-- channel, for non-queued waiters. When waiters queue, those whose
-- deadline passed are dropped, and the lock goes to the head of the queue
-- with a fresh fence, but only for the hand-off lease (or its TTL if
-- shorter): the message "p FENCE TIME PX" to that waiter (tell: on its
-- Locker's inbox, or its own channel) is its grant, for PX ms from the server time
-- TIME (us); the waiter's first refresh extends it to its TTL (or, under
-- replica sync, its next attempt confirms it). A head that died before it
-- could confirm keeps the lock no longer than the hand-off lease; the
-- next waiter then takes it (it polls when the holder's TTL runs out).
-- Returns one result per lock: 1 released, 0 gone already (expired or
-- deleted), -1 another token holds it (heldValue, the token check of
-- internal/rediscore/held.lua, prepended).
local t, now, nowms, us
local function clock()
  if not t then
    t = redis.call('TIME')
    now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    nowms = math.floor(now / 1000)
    us = t[1] .. string.sub('00000' .. t[2], -6)
  end
end

-- The next fence: max(counter + 1, server clock in us), as acquire.lua.
local function fence()
  local last = tonumber(redis.call('SET', KEYS[1], us, 'GET') or '0') or 0
  if last < now then
    return us
  end
  local f = string.format('%.0f', last + 1)
  redis.call('SET', KEYS[1], f)
  return f
end

local function drop(k, w)
  redis.call('ZREM', KEYS[k + 2], w)
  redis.call('ZREM', KEYS[k + 3], w)
  redis.call('HDEL', KEYS[k + 4], w, w .. '\n')
end

-- handOff gives lock k to its queue's live head, or wakes whoever waits.
local function handOff(k)
  local ch = KEYS[k + 1] .. ':released'
  clock()
  for _, w in ipairs(redis.call('ZRANGEBYSCORE', KEYS[k + 3], '-inf', nowms)) do
    drop(k, w)
  end
  local head = redis.call('ZRANGE', KEYS[k + 2], 0, 0)[1]
  if not head then
    redis.call('PUBLISH', ch, '')
    return
  end
  local asked = redis.call('HMGET', KEYS[k + 4], head, head .. '\n')
  local ask, inbox = asked[1], asked[2]
  if not ask then
    tell(ch, head, '', inbox)
    return
  end
  local ttl, owner = string.match(ask, '^([^\n]*)\n(.*)$')
  local px = tonumber(ARGV[1])
  if tonumber(ttl) < px then
    px = ttl
  end
  local f = fence()
  redis.call('SET', KEYS[k + 1], head .. '\n' .. f .. '\n' .. owner, 'PX', px)
  drop(k, head)
  tell(ch, head, 'p ' .. f .. ' ' .. us .. ' ' .. px, inbox)
end

local out = {}
for i = 1, #ARGV - 1 do
  local k = 5 * (i - 1) + 1
  local v, code = heldValue(KEYS[k + 1], ARGV[i + 1])
  if v then
    redis.call('DEL', KEYS[k + 1])
    code = 1
    if redis.call('EXISTS', KEYS[k + 2], KEYS[k + 5]) > 0 then
      handOff(k)
    end
  end
  out[i] = code
end
return out
