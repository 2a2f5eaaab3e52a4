-- release_batch: release.lua for many locks in one call (one hash slot in
-- Cluster). KEYS[2i-1] lock key, KEYS[2i] its queue; ARGV[i] its token.
-- Each lock freed wakes its queue's head on its own channel, or the
-- lock's release channel (lock .. ':released') when nobody queues.
-- Returns one result per lock: 1 released, 0 gone, -1 another token.
local out = {}
for i, tok in ipairs(ARGV) do
  local lock, queue = KEYS[2 * i - 1], KEYS[2 * i]
  local v = redis.call('GET', lock)
  if not v then
    out[i] = 0
  elseif string.sub(v, 1, #tok + 1) ~= tok .. '\n' then
    out[i] = -1
  else
    redis.call('DEL', lock)
    local head = redis.call('ZRANGE', queue, 0, 0)[1]
    if head then
      redis.call('PUBLISH', lock .. ':released:' .. head, '')
    else
      redis.call('PUBLISH', lock .. ':released', '')
    end
    out[i] = 1
  end
end
return out
