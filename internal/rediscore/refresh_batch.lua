-- refresh_batch: refresh.lua for many locks in one call (one hash slot in
-- Cluster). KEYS[i] lock key; ARGV[2i-1] its token, ARGV[2i] its TTL in ms.
-- Returns one result per key: 1 extended, 0 gone, -1 another token.
local out = {}
for i, key in ipairs(KEYS) do
  local tok = ARGV[2 * i - 1]
  local v = redis.call('GET', key)
  if not v then
    out[i] = 0
  elseif string.sub(v, 1, #tok + 1) ~= tok .. '\n' then
    out[i] = -1
  else
    redis.call('PEXPIRE', key, ARGV[2 * i])
    out[i] = 1
  end
end
return out
