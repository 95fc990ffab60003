-- release: delete the lock if the caller still holds it, and wake waiters.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the value the caller's grant stored (owner id, or owner id:token)
-- ARGV[2]  the wake-up channel of this lock
-- ARGV[3]  '1' to publish on a sharded channel (Redis Cluster), else '0'
--
-- Reply: 1 when the lock was released; 0 when the caller does not hold it (it
-- expired, or another owner holds it now), and then nothing is changed.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
if ARGV[3] == '1' then
  redis.call('SPUBLISH', ARGV[2], '')
else
  redis.call('PUBLISH', ARGV[2], '')
end
return 1
