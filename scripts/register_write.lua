-- register_write: a fenced write. (register_fence.lua is prepended.)
--
-- KEYS[1]  the register key
-- ARGV[1]  the writer's fencing token, a decimal string without leading zeros
-- ARGV[2]  the value to store
-- ARGV[3]  'c' to refuse a token beyond the clock ceiling, '' not to
--
-- Reply: 'ok' when the value and token were stored (as register_claim's
-- reply starts), otherwise refused's reply ('corrupt field text', 'stale
-- highest' or 'ahead ceiling'), and nothing changed.
local h = redis.call('HMGET', KEYS[1], 'token', 'claimed')
local no = refused(h[1], h[2], ARGV[1], ARGV[3])
if no then
  return no
end
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'value', ARGV[2])
return 'ok'
