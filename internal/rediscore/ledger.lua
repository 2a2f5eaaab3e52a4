-- The part the run ledger's scripts share (claim_run.lua and
-- finish_run.lua are appended to it).
-- KEYS[1] the name's ledger: a hash of the runs by slot field (the slot's
-- Unix nanoseconds, 19 digits: fixed width, so that string order is time
-- order) -> record (JSON), and under the field 'fence' the highest fence a
-- write has carried. KEYS[2] its index: a sorted set of the slot fields,
-- all of score 0, hence in slot order. One hash slot.
-- Fences are decimal strings, compared as such: exact for every 64-bit
-- fence, where tonumber would round those above 2^53.

-- below reports whether decimal a is below decimal b (no leading zeros).
local function below(a, b)
  return #a < #b or (#a == #b and a < b)
end

-- fenced refuses a write under fence f when it is below the ledger's
-- highest (returning that), and raises the highest to f otherwise.
local function fenced(f)
  local top = redis.call('HGET', KEYS[1], 'fence')
  if top and below(f, top) then
    return top
  end
  if top ~= f then
    redis.call('HSET', KEYS[1], 'fence', f)
  end
  return false
end

-- ended reports whether a decoded record has an outcome.
local function ended(r)
  return r.ended ~= nil and r.ended ~= cjson.null and r.ended ~= 0
end
