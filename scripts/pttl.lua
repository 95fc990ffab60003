-- pttl: the remaining ttl of a lock the caller holds.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the value the caller's grant stored (owner id, or owner id:token)
--
-- Reply: the remaining ttl in milliseconds (-1 when the key has no
-- expiry), or:
--   -2  the key is gone (expired or deleted) or the lease lapsed
--   -3  another owner holds it
-- A value with the mark of waiters carries its lease's expiry (wire.go).
-- (prelude.lua is prepended.)
local held = redis.call('GET', KEYS[1])
if not held then
  return -2
end
local grant, _, left = read_value(held)
if grant ~= ARGV[1] then
  return -3
elseif not left then
  return redis.call('PTTL', KEYS[1])
elseif left == 0 then
  return -2
end
return left
