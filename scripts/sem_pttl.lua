-- sem_pttl: the remaining ttl of the caller's permit of a semaphore.
-- (queue.lua and semaphore.lua are prepended.)
--
-- KEYS     the permits, the wait queue and the header (see semaphore.lua)
-- ARGV[1]  the caller's owner id
--
-- Reply: the remaining ttl in milliseconds; -2 when the caller holds no
-- permit (it expired, or was released or taken).
local s = open()
local expiry = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not expiry or tonumber(expiry) <= s.ms then
  return -2
end
return tonumber(expiry) - s.ms
