-- release: delete a lock held by a token and, when asked, wake waiters.
-- KEYS[1] lock key.
-- ARGV[1] token, ARGV[2] release channel ('' for none), ARGV[3] attempt
-- number ('' for any attempt: the lease's release; a number: the cleanup
-- of that failed attempt only, which must not touch a newer one's key).
-- Returns 1 (released), 0 (gone already), -1 (another token holds it).
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
local mine = ARGV[1] .. '/'
if ARGV[3] ~= '' then
  mine = mine .. ARGV[3] .. '\n'
end
if string.sub(v, 1, #mine) ~= mine then
  return -1
end
redis.call('DEL', KEYS[1])
-- The message names this release, the same on every node, so that a
-- waiter woken by one node ignores the copies from the others.
if ARGV[2] ~= '' then
  redis.call('PUBLISH', ARGV[2], string.sub(redis.sha1hex(v), 1, 16))
end
return 1
