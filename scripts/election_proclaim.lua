-- election_proclaim: the leader of a term changes the value the election
-- reports for it, without a new term, and tells the observers. Only while the
-- term is in office: the lock holds the grant whose token is the term, with a
-- lease that has not lapsed. A leader key that was deleted is written back with
-- it. The leader key and the messages are specified in
-- internal/lease/election.go; the lock's value, in scripts/wire.go.
-- (prelude.lua and lease.lua are prepended.)
--
-- KEYS[1]  the lock key
-- KEYS[2]  the election's leader key (a hash: grant, value)
-- ARGV[1]  the term, in decimal
-- ARGV[2]  the leader's new value
-- ARGV[3]  the election's channel
--
-- Reply:
--   1   the value was changed
--   0   the term is not in office (nothing changed)
local held, ttl = redis.call('GET', KEYS[1]), 0
if held then
  held, ttl = lease(held)
end
local colon = held and string.find(held, ':', 1, true)
if not colon or string.sub(held, colon + 1) ~= ARGV[1] then
  return 0
end
local grant = redis.call('HGET', KEYS[2], 'grant')
if grant and grant ~= held then
  return 0 -- another term's key: the holder has not taken office
end
redis.call('HSET', KEYS[2], 'grant', held, 'value', ARGV[2])
if ttl >= 0 then
  redis.call('PEXPIRE', KEYS[2], math.max(ttl, 1))
end
redis.call('PUBLISH', ARGV[3], 'elected ' .. ARGV[1] .. ' ' .. ttl .. ' ' .. ARGV[2])
return 1
