-- refresh_batch: refresh.lua for many locks in one call (one hash slot in
-- a Cluster); held.lua is prepended. KEYS[i] lock key; ARGV[2i-1] its
-- holder's mark (held), ARGV[2i] its TTL in ms.
-- Returns one result per key: 1 extended, 0 gone, -1 another token.
-- Never re-creates a missing key.
local out = {}
for i, key in ipairs(KEYS) do
  local v, code = heldValue(key, ARGV[2 * i - 1])
  if v then
    redis.call('PEXPIRE', key, ARGV[2 * i])
    code = 1
  end
  out[i] = code
end
return out
