-- force_release: free a lock whatever its token, and bump the fence so the
-- evicted holder's fenced writes are refused from now on.
-- KEYS[1] lock key, KEYS[2] fence counter, KEYS[3] queue, KEYS[4] the
-- name's legacy fence counter, KEYS[5] waiters' requests (for the head's
-- inbox: tell).
-- ARGV[1] release channel.
-- Returns {value or '', pttl, new fence}.
local v = redis.call('GET', KEYS[1]) or ''
local pttl = redis.call('PTTL', KEYS[1])
redis.call('DEL', KEYS[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local last = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
local legacy = tonumber(redis.call('GET', KEYS[4]) or '0') or 0
local held = 0
if v ~= '' then
  held = tonumber(string.match(v, '^[^\n]*\n([^\n]*)\n')) or 0
end
local fence = string.format('%.0f', math.max(last + 1, legacy + 1, held + 1, now))
redis.call('SET', KEYS[2], fence)
if legacy > 0 then
  redis.call('DEL', KEYS[4])
end
if v ~= '' then
  local head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
  if head then
    tell(ARGV[1], head, '', inboxOf(KEYS[5], head))
  else
    redis.call('PUBLISH', ARGV[1], '')
  end
end
return {v, pttl, fence}
