-- pttl: the remaining ttl of a lock the caller holds.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the value the caller's grant stored (owner id, or owner id:token)
--
-- Reply: the remaining ttl in milliseconds (-1 when the key has no
-- expiry), or:
--   -2  the key is gone (expired or deleted) or the lease lapsed
--   -3  another owner holds it
-- A value with the mark of waiters carries its lease's expiry (handoff.go).
local held = redis.call('GET', KEYS[1])
if not held then
  return -2
elseif held == ARGV[1] then
  return redis.call('PTTL', KEYS[1])
elseif string.sub(held, 1, #ARGV[1] + 1) ~= ARGV[1] .. '*' then
  return -3
end
local expiry = tonumber(string.sub(held, #ARGV[1] + 2))
if not expiry then
  return redis.call('PTTL', KEYS[1])
end
local now = redis.call('TIME')
local left = expiry - tonumber(now[1]) * 1000 - math.floor(tonumber(now[2]) / 1000)
if left <= 0 then
  return -2
end
return left
