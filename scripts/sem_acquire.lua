-- sem_acquire: one attempt to take a permit of a semaphore, without
-- queueing: the free permits go to the waiters queued first, and one left
-- over to the caller. (queue.lua and semaphore.lua are prepended.)
--
-- KEYS     the permits, the wait queue and the limit (see semaphore.lua)
-- ARGV[1]  the caller's owner id
-- ARGV[2]  the permit's ttl in milliseconds
-- ARGV[3]  the semaphore's limit, in decimal
-- ARGV[4]  '1' when grant channels are sharded (Redis Cluster), else '0'
--
-- Reply: {1, owner} for a permit granted by this call, {2, owner} for one
-- the caller held already (its ttl restarted); else {0, ttl, '', ''}, ttl
-- the ms until the first live permit expires. An error reply 'LIMIT n' when
-- the live permits were granted under another limit, n.
local s, err = enter(ARGV[3], ARGV[4])
if not s then
  return redis.error_reply(err)
elseif renew(s) then
  return {2, ARGV[1]}
elseif serve(s, nil, nil, true) then
  return {1, ARGV[1]}
end
return {0, first(s), '', ''}
