-- Fenced write: KEYS[1] the value, KEYS[2] the fence stored beside it.
-- ARGV[1] the offered fence (decimal, no leading zeros), ARGV[2] the value.
-- Returns {1, fence} when written, {0, current} when the offered fence is
-- lower than the stored one. Fences are compared as decimal strings
-- (length, then bytes), which is exact for every uint64; Lua numbers are
-- doubles and lose precision above 2^53.
local function lower(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end
local cur = redis.call('GET', KEYS[2])
if cur and lower(ARGV[1], cur) then
  return {0, cur}
end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('SET', KEYS[2], ARGV[1])
return {1, ARGV[1]}
