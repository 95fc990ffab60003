-- refresh: restart the lease ttl if the caller still holds the lock; the
-- fence counter of a lock whose counter expires with its lease (kind 't')
-- is kept at least as long, and so is an election's leader key. A value
-- with the mark of waiters carries its lease's expiry, and its key outlives
-- the lease by LINGER (scripts/wire.go). (prelude.lua is
-- prepended.)
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's fence counter key (only with ARGV[3] = 't')
-- KEYS[3]  an election's leader key (internal/lease/election.go), optional
-- ARGV[1]  the value the caller's grant stored
-- ARGV[2]  the new ttl in milliseconds
-- ARGV[3]  't' for a counter that expires with the lease, else '' or absent
--
-- Reply:
--   1   the ttl was set
--   2   it was set, and the leader key does not hold the caller's grant
--       (deleted or evicted: the leader writes it back)
--   0   the key is gone or the lease lapsed (nothing changed)
--   -1  another owner holds it (nothing changed)
local held = redis.call('GET', KEYS[1])
if not held then
  return 0
end
local grant, _, left, now = read_value(held)
if grant ~= ARGV[1] then
  return -1
elseif left == 0 then
  return 0
end
restart(grant, ARGV[2], now)
if ARGV[3] == 't' and redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
if KEYS[3] then
  if redis.call('HGET', KEYS[3], 'grant') ~= ARGV[1] then
    return 2
  end
  redis.call('PEXPIRE', KEYS[3], ARGV[2])
end
return 1
