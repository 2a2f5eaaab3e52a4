-- force: delete a lock key whatever its token, wake the waiters and read
-- the node's fence counter, in one atomic step (counter.lua is
-- prepended).
-- KEYS[1] lock key, KEYS[2] fence counter.
-- ARGV[1] release channel, ARGV[2] '1' to read the counter.
-- Returns {value or '', pttl, counter}. A missing counter (a node restarted
-- empty) reads as the acquire script would give it, the node's clock in
-- microseconds, which is above every value it can have held before.
local v = redis.call('GET', KEYS[1])
local pttl = redis.call('PTTL', KEYS[1])
local counter = '0'
if ARGV[2] == '1' then
  counter = fencecounter()
  if not counter then
    local t = redis.call('TIME')
    counter = t[1] .. string.format('%06d', tonumber(t[2]))
  end
end
if not v then
  return {'', -2, counter}
end
redis.call('DEL', KEYS[1])
-- The same message on every node, so that a waiter woken by one node
-- ignores the copies from the others.
local tok = string.match(v, '^[^/\n]*')
redis.call('PUBLISH', ARGV[1], string.sub(redis.sha1hex('force\n' .. tok), 1, 16))
return {v, pttl, counter}
