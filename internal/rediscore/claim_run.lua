-- claim_run: record a run as its slot's run, unless the slot has a record
-- to keep; fenced; then keep only the newest slots (ledger.lua).
-- ARGV[1] slot field, ARGV[2] fence, ARGV[3] the record (JSON, its fence a
-- decimal string), ARGV[4] '1' to replace a record that has no outcome and
-- a lower fence (its runner's lease is gone), ARGV[5] how many slots to
-- keep (at least 1).
-- Returns {-1, highest fence} when ARGV[2] is below the ledger's highest
-- (nothing written), {0, record} when the slot keeps its record, {1} when
-- ARGV[3] is the slot's record now.
local top = fenced(ARGV[2])
if top then
  return {-1, top}
end
local old = redis.call('HGET', KEYS[1], ARGV[1])
if old then
  local r = cjson.decode(old)
  if ARGV[4] ~= '1' or ended(r) or not below(r.fence, ARGV[2]) then
    return {0, old}
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[2], 0, ARGV[1])
local extra = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[5])
if extra > 0 then
  for _, s in ipairs(redis.call('ZRANGE', KEYS[2], 0, extra - 1)) do
    redis.call('HDEL', KEYS[1], s)
  end
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, extra - 1)
end
return {1}
