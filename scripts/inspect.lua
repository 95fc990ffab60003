-- inspect: what an operator may know of a lock, read without changing anything:
-- whether a live lease holds it, for how long, how many live waiters queue for
-- it, and its token. (prelude.lua, lease.lua and queue.lua are prepended.)
-- The value with its mark and the queue entry are specified in
-- scripts/wire.go. Never returns the owner id.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's wait queue
-- KEYS[3]  the lock's fence counter key
-- ARGV[1]  '1' when grant channels are sharded (Redis Cluster), else '0'
--
-- Reply: {held, ttl, waiters, token}: held 1 or 0; ttl the lease's
-- remaining ms (0 when not held, -1 without expiry); waiters the live
-- entries among the first 300 of the queue, plus every entry past those,
-- unchecked (so that the script stays short whatever the queue holds);
-- token the holder's fencing token, or when not held the counter's (the
-- last token granted), as text ('' for none). A counter of another type:
-- an error reply starting BADFENCE.
local held, ttl, token = redis.call('GET', KEYS[1]), 0, ''
if held then
  held, ttl = lease(held)
end
local colon = held and string.find(held, ':', 1, true)
if colon then
  token = string.sub(held, colon + 1)
end
if token == '' then
  local counter = redis.pcall('GET', KEYS[3])
  if type(counter) == 'table' then
    return redis.error_reply('BADFENCE fence counter ' .. KEYS[3] .. ' holds a key of another type (' .. tostring(counter.err) .. ')')
  end
  token = counter or ''
end
local scan = scanning(ARGV[1])
local entries = redis.call('ZRANGE', KEYS[2], 0, 299, 'WITHSCORES')
local waiters = 0
for i = 1, #entries, 2 do
  if waiting(entries[i], entries[i + 1], scan) then
    waiters = waiters + 1
  end
end
if #entries == 600 then
  waiters = waiters + redis.call('ZCARD', KEYS[2]) - 300
end
return {held and 1 or 0, ttl, waiters, token}
