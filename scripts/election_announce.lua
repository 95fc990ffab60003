-- election_announce: a candidate that holds the election's lock takes office:
-- it stores its value as the leader's, beside the lock, and tells the
-- observers. Only the holder of the grant can: a deposed leader's call changes
-- nothing. A leader whose leader key was deleted writes it back the same way.
-- The leader key expires with the lease (refresh.lua keeps it alive). The
-- leader key and the messages are specified in internal/lease/election.go; the
-- lock's value, in scripts/wire.go. (prelude.lua and lease.lua are
-- prepended.)
--
-- KEYS[1]  the lock key
-- KEYS[2]  the election's leader key (a hash: grant, value)
-- ARGV[1]  the value the candidate's grant stored ("owner:token")
-- ARGV[2]  the leader's value
-- ARGV[3]  the election's channel
--
-- Reply:
--   1   the candidate took office (again, after a client retry)
--   0   the lock holds another grant, none, or a lease that lapsed
--       (nothing changed)
local held, ttl = redis.call('GET', KEYS[1]), 0
if held then
  held, ttl = lease(held)
end
local colon = string.find(ARGV[1], ':', 1, true)
if not held or held ~= ARGV[1] or not colon then
  return 0
end
redis.call('HSET', KEYS[2], 'grant', ARGV[1], 'value', ARGV[2])
if ttl >= 0 then
  redis.call('PEXPIRE', KEYS[2], math.max(ttl, 1))
end
redis.call('PUBLISH', ARGV[3], 'elected ' .. string.sub(ARGV[1], colon + 1) .. ' ' .. ttl .. ' ' .. ARGV[2])
return 1
