-- refresh: restart the lease ttl if the caller still holds the lock; the
-- fence counter of a lock whose counter expires with its lease (kind 't')
-- is kept at least as long.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's fence counter key (only with ARGV[3] = 't')
-- ARGV[1]  the value the caller's grant stored
-- ARGV[2]  the new ttl in milliseconds
-- ARGV[3]  't' for a counter that expires with the lease, else absent
--
-- Reply: 1 when the ttl was set; 0 when the key is gone, -1 when another
-- owner holds it (nothing changed then).
local held = redis.call('GET', KEYS[1])
if not held then
  return 0
elseif held ~= ARGV[1] and held ~= ARGV[1] .. '*' then -- the mark: handoff.go
  return -1
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if ARGV[3] == 't' and redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
return 1
