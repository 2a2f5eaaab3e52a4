-- Phase 2 of a fenced Redlock grant on one node: if the lock is still this
-- attempt's, raise the node's fence counter to at least the grant's fence
-- (never lowering it) and record the fence in the lock's value.
-- With ARGV[3] = 'counter' it only raises the counter, whoever holds the
-- lock (levelling the nodes after a grant; raising is always safe).
-- KEYS[1] lock key, KEYS[2] the node's fence counter (see counter.lua);
-- held is the token check (internal/rediscore/held.lua).
-- ARGV[1] "token/attempt", ARGV[2] the fence, ARGV[3] 'fence' or 'counter'.
-- Returns 1 when done, 0 when the lock is no longer this attempt's.
local level = ARGV[3] == 'counter'
local v = redis.call('GET', KEYS[1])
local mine = v and held(v, ARGV[1] .. '\n')
if not mine and not level then
  return 0
end
local last = tonumber(fencecounter() or '0') or 0
if last < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], ARGV[2])
end
if level then
  return 1
end
local owner = string.match(v, '^[^\n]*\n[^\n]*\n(.*)$') or ''
redis.call('SET', KEYS[1], ARGV[1] .. '\n' .. ARGV[2] .. '\n' .. owner, 'KEEPTTL')
return 1
