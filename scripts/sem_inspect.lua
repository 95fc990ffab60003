-- sem_inspect: what an operator may know of a semaphore, read without
-- changing anything: the limit of its live permits, how many are live, and
-- how many live waiters queue. (prelude.lua, queue.lua and semaphore.lua
-- are prepended.) Never returns an owner id.
--
-- KEYS     the permits (with the header) and the wait queue (see semaphore.lua)
-- ARGV[1]  '1' when grant channels are sharded (Redis Cluster), else '0'
--
-- Reply: {limit, held, waiters}: limit the one the live permits were
-- granted under (0 when none is live), held the live permits, waiters as
-- inspect.lua counts them.
local s = open(ARGV[1])
local held = redis.call('ZCOUNT', KEYS[1], '(' .. string.format('%d', s.ms), '+inf')
local limit = 0
if held > 0 then
  limit = tonumber(s.limit) or 0
end
local entries = redis.call('ZRANGE', KEYS[2], 0, 299, 'WITHSCORES')
local waiters = 0
for i = 1, #entries, 2 do
  if waiting(entries[i], entries[i + 1], s.scan) then
    waiters = waiters + 1
  end
end
if #entries == 600 then
  waiters = waiters + redis.call('ZCARD', KEYS[2]) - 300
end
return {limit, held, waiters}
