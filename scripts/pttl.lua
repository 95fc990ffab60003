-- pttl: the remaining ttl of a lock the caller holds.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the value the caller's grant stored (owner id, or owner id:token)
--
-- Reply: the remaining ttl in milliseconds (-1 when the key has no expiry); -2
-- when the key is gone (expired or deleted), -3 when another owner holds it.
local held = redis.call('GET', KEYS[1])
if not held then
  return -2
elseif held ~= ARGV[1] and held ~= ARGV[1] .. '*' then -- the mark: handoff.go
  return -3
end
return redis.call('PTTL', KEYS[1])
