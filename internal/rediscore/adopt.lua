-- adopt: extend a lock held by a token, as refresh does, and return its
-- value, from which the adopter learns the grant's fence (held.lua is
-- prepended).
-- KEYS[1] lock key. ARGV[1] the holder's mark (held), ARGV[2] TTL in ms.
-- Returns the value "token\nfence\nowner" (extended), or 0 (gone:
-- expired or deleted), -1 (another token).
local v, code = heldValue(KEYS[1], ARGV[1])
if not v then
  return code
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return v
