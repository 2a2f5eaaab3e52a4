-- finish_run: record a run's outcome, fenced (ledger.lua): the slot's
-- record is replaced by the finished one if it is still the same run
-- (same fence).
-- ARGV[1] slot field, ARGV[2] fence, ARGV[3] the finished record (JSON).
-- Returns -1 when ARGV[2] is below the ledger's highest fence, 0 when the
-- slot has no record of that fence (dropped, or replaced by a rerun), 1
-- when the outcome is recorded. Nothing is written but the fence unless 1.
if fenced(ARGV[2]) then
  return -1
end
local old = redis.call('HGET', KEYS[1], ARGV[1])
if not old or cjson.decode(old).fence ~= ARGV[2] then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
