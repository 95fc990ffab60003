-- register_claim: raise a register's fence to a token before reading it.
-- (register_fence.lua is prepended.)
--
-- KEYS[1]  the register key
-- ARGV[1]  the claimer's fencing token, a decimal string without leading zeros
-- ARGV[2]  'c' to refuse a token beyond the clock ceiling, '' not to
--
-- Reply: {'ok', writer, value} when the token was recorded as claimed, with
-- the token that wrote the value ('0' and false if none); otherwise refused's
-- reply ({'corrupt', field, text}, {'stale', highest} or {'ahead', ceiling})
-- and nothing changed.
local h = redis.call('HMGET', KEYS[1], 'token', 'claimed', 'value')
local no = refused(h[1], h[2], ARGV[1], ARGV[2])
if no then
  return no
end
if h[2] ~= ARGV[1] then
  redis.call('HSET', KEYS[1], 'claimed', ARGV[1])
end
return {'ok', h[1] or '0', h[3]}
