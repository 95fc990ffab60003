-- election_leader: the election's leader, read with its lock in one step, so
-- that a leader key left by a leader whose lease has ended is never taken for
-- the current one. The leader key is specified in internal/lease/election.go;
-- the lock's value, in scripts/wire.go. (prelude.lua and lease.lua
-- are prepended.)
--
-- KEYS[1]  the lock key
-- KEYS[2]  the election's leader key (a hash: grant, value)
-- ARGV[1]  '1' to read the leader's value too, else '0'
--
-- Reply:
--   {0}  the lock is free (or its lease lapsed)
--   {1, ttl}  it is held by a grant that has not taken office
--   {2, ttl, term}  it is held by the leader; with ARGV[1] = '1',
--       {2, ttl, term, value}
-- ttl is the lease's remaining ms (-1: no expiry), term the grant's token
-- as a decimal string.
local held, ttl = redis.call('GET', KEYS[1]), 0
if held then
  held, ttl = lease(held)
end
if not held then
  return {0}
end
local colon = string.find(held, ':', 1, true)
if not colon or redis.call('HGET', KEYS[2], 'grant') ~= held then
  return {1, ttl}
end
local term = string.sub(held, colon + 1)
if ARGV[1] == '1' then
  return {2, ttl, term, redis.call('HGET', KEYS[2], 'value') or ''}
end
return {2, ttl, term}
