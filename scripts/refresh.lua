-- refresh: restart the lease ttl if the caller still holds the lock.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the value the caller's grant stored (owner id, or owner id:token)
-- ARGV[2]  the new ttl in milliseconds
--
-- Reply: 1 when the ttl was set; when the caller does not hold the lock, 0 if
-- the key is gone (expired or deleted) and -1 if another owner holds it, and
-- then nothing is changed.
local held = redis.call('GET', KEYS[1])
if not held then
  return 0
elseif held ~= ARGV[1] and held ~= ARGV[1] .. '*' then -- '*': see wait.lua
  return -1
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
