-- register_write: a fenced write. Store a value only if its token is at least
-- the highest token this register has accepted, and record that token.
--
-- KEYS[1]  the register key (a hash with fields 'token' and 'value')
-- ARGV[1]  the writer's fencing token, a decimal string without leading zeros
-- ARGV[2]  the value to store
--
-- Reply: 1 when the write was accepted; otherwise the highest token accepted so
-- far, as a decimal string, and nothing is changed. An equal token is accepted:
-- it is the same grant writing again.
local function greater(a, b)
  if #a ~= #b then
    return #a > #b
  end
  return a > b
end

local highest = redis.call('HGET', KEYS[1], 'token')
if highest and greater(highest, ARGV[1]) then
  return highest
end
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'value', ARGV[2])
return 1
