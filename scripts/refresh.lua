-- refresh: restart the lease ttl if the caller still holds the lock.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the value the caller's grant stored (owner id, or owner id:token)
-- ARGV[2]  the new ttl in milliseconds
--
-- Reply: 1 when the ttl was set; 0 when the caller does not hold the lock, and
-- then nothing is changed.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
