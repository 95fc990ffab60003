-- refresh: restart the lease ttl if the caller still holds the lock; the
-- fence counter of a lock whose counter expires with its lease (kind 't')
-- is kept at least as long, and so is an election's leader key. A value
-- with the mark of waiters carries its lease's expiry, and its key outlives
-- the lease by LINGER (scripts/wire.go). With ARGV[4] it also stores a new
-- grant in place of the caller's: the same owner's, with a token drawn from
-- a token source (internal/lease's tokens.go), and leaves the mark KEYS[3]
-- that it did, for a resend of the same call: a lock holding ARGV[4] is the
-- caller's only with that mark, for the scripts may grant the same value
-- (the owner's, with a counter's token equal to the one drawn) to an entry
-- of the owner's. The mark lasts no longer than the lease it stored.
-- (prelude.lua is prepended.)
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's fence counter key (read only with ARGV[3] = 't')
-- KEYS[3]  an election's leader key (internal/lease/election.go), optional;
--          with ARGV[4], the mark of the stamp instead (scripts.StampKey)
-- ARGV[1]  the value the caller's grant stored
-- ARGV[2]  the new ttl in milliseconds
-- ARGV[3]  't' for a counter that expires with the lease, else '' or absent
-- ARGV[4]  the grant to store instead of ARGV[1], optional; a lock holding
--          it already, with the mark KEYS[3], is the caller's too (a
--          resend of this call)
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
local grant, marked, left, now = read_value(held)
local new = ARGV[4]
if grant ~= ARGV[1] and not (new and grant == new and redis.call('EXISTS', KEYS[3]) == 1) then
  return -1
elseif left == 0 then
  return 0
end
if not new then
  restart(grant, ARGV[2], now)
else
  -- A ms short of the lease, so that no grant the scripts make once it
  -- lapsed finds the mark.
  redis.call('SET', KEYS[3], 's', 'PX', math.max(tonumber(ARGV[2]) - 1, 1))
  if now then
    restart(new, ARGV[2], now)
  else
    -- A mark without expiry (a key set by hand) stays, as restart keeps it.
    redis.call('SET', KEYS[1], marked and new .. '*' or new, 'PX', ARGV[2])
  end
end
if ARGV[3] == 't' and redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
if KEYS[3] and not new then
  if redis.call('HGET', KEYS[3], 'grant') ~= ARGV[1] then
    return 2
  end
  redis.call('PEXPIRE', KEYS[3], ARGV[2])
end
return 1
