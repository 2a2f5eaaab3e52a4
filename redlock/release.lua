-- release: delete a lock held by a token and, when asked, wake waiters.
-- heldValue, the token check, is prepended (internal/rediscore/held.lua).
-- KEYS[1] lock key.
-- ARGV[1] the holder's mark: "token/" for any attempt (the lease's
-- release), "token/attempt\n" for one (the cleanup of that failed attempt
-- only, which must not touch a newer one's key); ARGV[2] release channel
-- ('' for none).
-- Returns 1 (released), 0 (gone already), -1 (another token holds it).
local v, code = heldValue(KEYS[1], ARGV[1])
if not v then
  return code
end
redis.call('DEL', KEYS[1])
-- The message names this release, the same on every node, so that a
-- waiter woken by one node ignores the copies from the others.
if ARGV[2] ~= '' then
  redis.call('PUBLISH', ARGV[2], string.sub(redis.sha1hex(v), 1, 16))
end
return 1
