-- election_announce: a candidate that holds the election's lock takes office:
-- it stores its value as the leader's, beside the lock, and tells the
-- observers. Only the holder of the grant can: a deposed leader's call
-- changes nothing. The leader key and the messages are specified in
-- correctness/election.go.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the election's leader key (a hash: grant, value)
-- ARGV[1]  the value the candidate's grant stored ("owner:token")
-- ARGV[2]  the leader's value
-- ARGV[3]  the election's channel
--
-- Reply: 1 when the candidate took office (again, after a client retry);
-- 0 when the lock holds another grant or none (nothing changed).
local held = redis.call('GET', KEYS[1])
if not held then
  return 0
end
if string.byte(held, -1) == 42 then -- the mark of waiters
  held = string.sub(held, 1, -2)
end
local colon = string.find(ARGV[1], ':', 1, true)
if held ~= ARGV[1] or not colon then
  return 0
end
redis.call('HSET', KEYS[2], 'grant', ARGV[1], 'value', ARGV[2])
local ttl = redis.call('PTTL', KEYS[1])
redis.call('PUBLISH', ARGV[3], 'elected ' .. string.sub(ARGV[1], colon + 1) .. ' ' .. ttl .. ' ' .. ARGV[2])
return 1
