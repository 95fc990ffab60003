-- pttl: the remaining ttl of a lock the caller holds.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the value the caller's grant stored (owner id, or owner id:token)
--
-- Reply: the remaining ttl in milliseconds (-1 when the key has no expiry), or
-- -2 when the caller does not hold the lock.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return -2
end
return redis.call('PTTL', KEYS[1])
