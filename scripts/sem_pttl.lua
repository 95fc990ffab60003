-- sem_pttl: the remaining ttl of the caller's permit of a semaphore.
-- (prelude.lua is prepended.)
--
-- KEYS     the permits (with the header) and the wait queue (see
--          semaphore.lua)
-- ARGV[1]  the caller's owner id
--
-- Reply: the remaining ttl in milliseconds, or:
--   -2  the caller holds no permit (it expired, or was released or taken)
local ms = clock()
local expiry = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not expiry or tonumber(expiry) <= ms then
  return -2
end
return tonumber(expiry) - ms
