-- election_resign: a leader whose term has ended (its lease was released or
-- lost) clears its leader key, and when nobody holds the lock tells the
-- observers that the election has no leader. A successor the release handed the
-- lock to announces itself (election_announce), so no message is sent for it.
-- The leader key and the messages are specified in internal/lease/election.go;
-- the lock's value, in scripts/wire.go. (prelude.lua and lease.lua
-- are prepended.)
--
-- KEYS[1]  the lock key
-- KEYS[2]  the election's leader key (a hash: grant, value)
-- ARGV[1]  the value the leader's grant stored ("owner:token")
-- ARGV[2]  the election's channel
--
-- Reply:
--   1   the vacancy was published
--   0   it was not
if redis.call('HGET', KEYS[2], 'grant') == ARGV[1] then
  redis.call('DEL', KEYS[2])
end
local colon = string.find(ARGV[1], ':', 1, true)
if not colon then
  return 0
end
local held = redis.call('GET', KEYS[1])
if held and lease(held) then
  return 0 -- held, by a lease that has not lapsed
end
redis.call('PUBLISH', ARGV[2], 'vacant ' .. string.sub(ARGV[1], colon + 1))
return 1
