-- sem_release: end the caller's permit of a semaphore, and hand the free
-- permits to the first live waiters in its queue; if none took one, wake
-- the waiters that do not queue, when some have waited. (queue.lua and
-- semaphore.lua are prepended.) Its ARGV are release.lua's.
--
-- KEYS     the permits, the wait queue and the limit (see semaphore.lua)
-- ARGV[1]  the caller's owner id
-- ARGV[2]  unused (a permit matches its owner id exactly)
-- ARGV[3]  a queue entry to remove first (a waiter giving up), or ''
-- ARGV[4]  '1' when grant channels are sharded (Redis Cluster), else '0'
-- ARGV[5]  another entry to remove with ARGV[3] (its next one), optional
--
-- Reply: 0 when the caller holds no permit (it expired, or was never
-- granted); 1 when released; 2 when released and a permit was handed to a
-- waiter.
if ARGV[3] ~= '' then
  redis.call('ZREM', KEYS[2], ARGV[3], ARGV[5] or ARGV[3])
end
local s = open(ARGV[4])
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  return 0
end
s.count = s.count - 1
local _, handed = serve(s)
if handed == 0 and s.marked then
  redis.call('PUBLISH', KEYS[1] .. ':wake', '')
end
if s.count == 0 then
  redis.call('DEL', KEYS[3])
end
if handed > 0 then
  return 2
end
return 1
