-- sem_acquire: one attempt to take a permit of a semaphore, without
-- queueing: the free permits go to the waiters queued first, and one left
-- over to the caller. (prelude.lua, queue.lua and semaphore.lua are
-- prepended.)
--
-- KEYS     the permits (with the header) and the wait queue (see semaphore.lua)
-- ARGV[1]  the caller's owner id
-- ARGV[2]  the permit's ttl in milliseconds
-- ARGV[3]  the semaphore's limit, in decimal
-- ARGV[4]  '1' when grant channels are sharded (Redis Cluster), else '0'
-- ARGV[5]  optional: '1' for a waiter's first attempt, which need not know
--          whether the caller holds a permit already (its wait finds out)
--
-- Reply, a string of fields as wait.lua's (place and now empty):
--   1 owner            a permit granted by this call
--   2 owner            one the caller held already (its ttl restarted)
--   4 0 place now      dead entries are still ahead of the first live
--                      waiter: attempt again at once
--   0 0 place now      no permit is free for the caller
-- An error reply 'LIMIT n' when the live permits were granted under another
-- limit, n.
local s, err = enter(ARGV[3], ARGV[4])
if not s then
  return redis.error_reply(err)
elseif s.count > 0 and ARGV[5] ~= '1' and renew(s) then
  return '2 ' .. ARGV[1]
elseif serve(s, nil, nil, true) then
  return '1 ' .. ARGV[1]
elseif s.scan.more then
  return '4 0  '
end
return '0 0  '
