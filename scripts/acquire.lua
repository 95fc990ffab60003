-- acquire: take a free efficiency lock, or say how long its holder keeps it.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the caller's owner id
-- ARGV[2]  the lease ttl in milliseconds
--
-- Reply: 0 when the lock is the caller's: newly granted, or granted again to the
-- same owner (a retried call after a lost reply gets the same grant, with its ttl
-- restarted). Otherwise the holder's remaining ttl in milliseconds (at least 1),
-- or -1 when the holder's key has no expiry.
local holder = redis.call('GET', KEYS[1])
if holder == false or holder == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 0
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl == 0 then
  return 1
end
return ttl
