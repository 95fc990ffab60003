-- expire_if_eq: restart the lease of a lock that holds exactly the caller's
-- bare grant, as SET key value IFEQ value PX ttl does on a server that has
-- it (Redis 8.4 and later, Valkey 8.1 and later): the plain path's refresh
-- where the server has not (internal/lease's plain.go). A value with the
-- mark of waiters, another owner's, or none is left as it is, and the
-- caller runs refresh.lua.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the value the caller's grant stored (an owner id)
-- ARGV[2]  the new ttl in milliseconds
--
-- Reply:
--   1  the ttl was set
--   0  it was not: gone, or not holding ARGV[1] exactly
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
