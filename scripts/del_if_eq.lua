-- del_if_eq: delete a lock that holds exactly the caller's bare grant, as
-- DELEX key IFEQ value does on a server that has it (Redis 8.4 and later;
-- DELIFEQ on Valkey 9.0 and later): the plain path's release where the
-- server has neither (internal/lease's plain.go). A value with the mark of
-- waiters, another owner's, or none is left as it is, and the caller runs
-- release.lua, which serves the queue.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the value the caller's grant stored (an owner id)
--
-- Reply:
--   1  the lock was deleted
--   0  it was not: gone, or not holding ARGV[1] exactly
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
