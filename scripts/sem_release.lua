-- sem_release: end the caller's permit of a semaphore, and hand it to the
-- first live waiter in its queue; if none took it, wake the waiters that do
-- not queue, when some have waited. (prelude.lua, queue.lua and
-- semaphore.lua are prepended.) Its ARGV are release.lua's. A permit that
-- expired meanwhile is found by the waiters' next attempt, which serves them
-- in queue order.
--
-- A release that ends the caller's permit leaves a mark for ARGV[6] ms, as
-- release.lua's does: a resend of the same call after a lost reply finds
-- the permit gone, and replies 1 from the mark.
--
-- KEYS[1], KEYS[2]  the permits (with the header) and the wait queue (see
--          semaphore.lua)
-- KEYS[3]  the mark of the caller's permit (internal/lease's EndedKey),
--          optional: without it no mark is read or written
-- ARGV[1]  the caller's owner id; '' to go on serving the queue after a
--          release that replied 3
-- ARGV[2]  unused (a permit matches its owner id exactly)
-- ARGV[3]  a queue entry to remove first (a waiter giving up), or ''
-- ARGV[4]  '1' when grant channels are sharded (Redis Cluster), else '0'
-- ARGV[5]  another entry to remove with ARGV[3] (its next one), optional
-- ARGV[6]  how long the mark lasts, in ms: optional, with KEYS[3] only
--
-- Reply, a string as release.lua's: the code, and after a space '-' when
-- this call handed a permit on (a permit has no token):
--   1   released (or an earlier send of this call released it)
--   2 -  released, and handed to a waiter
--   0   the caller holds no permit (it expired, or was never granted)
--   3   released (or, with ARGV[1] '', served) with dead entries still
--       ahead of the first live waiter: the caller calls again with ARGV[1]
--       '' to go on
if ARGV[3] ~= '' then
  local next = ARGV[5] or ''
  redis.call('ZREM', KEYS[2], ARGV[3], next ~= '' and next or ARGV[3])
end
local s = open(ARGV[4])
prune(s)
if ARGV[1] == '' then
  -- Going on: hand out the permits free now, in queue order.
  s.count = redis.call('ZCOUNT', KEYS[1], '(' .. string.format('%d', s.ms), '+inf')
  serve(s)
  if s.scan.more then
    return '3'
  elseif s.marked and s.count < (tonumber(s.limit) or 0) then
    redis.call('PUBLISH', KEYS[1] .. ':wake', '')
  end
  return '1'
elseif redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  if KEYS[3] and redis.call('GET', KEYS[3]) then
    redis.call('PEXPIRE', KEYS[3], ARGV[6])
    return '1'
  end
  return '0'
end
if KEYS[3] then
  redis.call('SET', KEYS[3], 'r', 'PX', ARGV[6])
end
local w = next_waiter(KEYS[2], s.now, s.scan)
if s.scan.more then
  return '3'
elseif not w then
  if s.marked then
    redis.call('PUBLISH', KEYS[1] .. ':wake', '')
  end
  if s.member and redis.call('ZCARD', KEYS[1]) == 1 then
    redis.call('ZREM', KEYS[1], s.member) -- the last permit: nothing is left
  end
  return '1'
end
admit(s, w.owner, w.ttl)
announce(s.publish, w, '-', s.now, s.limit)
return '2 -'
