-- Phase 1 of a Redlock grant on one node: take the lock if it is free, or
-- already held by this token from an earlier attempt of the same Acquire
-- (a reply that was lost), and, when fencing, bump this node's fence
-- counter (one for every name, counter.lua) in the same atomic step. A missing counter (a node restarted
-- empty) is first seeded from the node's clock in microseconds, which is
-- above every value it can have held before.
-- The lock's value is "token/attempt\nfence\nowner". The attempt number
-- grows with every attempt of one token: a stale attempt's request that
-- arrives late never overwrites a newer attempt's key.
-- KEYS[1] lock key, KEYS[2] the node's fence counter (see counter.lua);
-- held is the token check (internal/rediscore/held.lua).
-- ARGV[1] token, ARGV[2] TTL in ms, ARGV[3] owner, ARGV[4] '1' to fence,
-- ARGV[5] attempt number.
-- Returns {1, counter} when taken ('0' without fencing), else
-- {0, fence, owner, pttl} describing the holder.
local mine = ARGV[1] .. '/'
local v = redis.call('GET', KEYS[1])
if v then
  local tok, fence, owner = string.match(v, '^([^\n]*)\n([^\n]*)\n(.*)$')
  local own = tok and held(v, mine)
  if not own or (tonumber(string.sub(tok, #mine + 1)) or 0) > tonumber(ARGV[5]) then
    return {0, fence or '0', owner or '', redis.call('PTTL', KEYS[1])}
  end
end
local fence = '0'
if ARGV[4] == '1' then
  if not fencecounter() then
    local t = redis.call('TIME')
    redis.call('SET', KEYS[2], t[1] .. string.format('%06d', tonumber(t[2])))
  end
  redis.call('INCR', KEYS[2])
  fence = redis.call('GET', KEYS[2])
end
redis.call('SET', KEYS[1], mine .. ARGV[5] .. '\n' .. fence .. '\n' .. ARGV[3], 'PX', ARGV[2])
return {1, fence}
