-- sem_wait: one attempt of a waiter for a permit of a semaphore: keep its
-- place in the queue (or queue it), hand the free permits to the waiters in
-- queue order, the caller among them in its turn; a waiter that does not
-- queue takes a permit left over, or marks the semaphore as waited for.
-- (prelude.lua, queue.lua and semaphore.lua are prepended.) The queue
-- entry is specified in scripts/wire.go.
--
-- KEYS     the permits (with the header) and the wait queue (see semaphore.lua)
-- ARGV[1]  the caller's owner id
-- ARGV[2]  the permit's ttl in milliseconds
-- ARGV[3]  the semaphore's limit, in decimal
-- ARGV[4]  the entry to queue, or '' for a waiter that does not queue
-- ARGV[5]  the place of the caller's previous entry, or '' if it has none
-- ARGV[6]  that previous entry, or ''
-- ARGV[7]  '1' when grant channels are sharded (Redis Cluster), else '0'
--
-- Reply, a string of fields as wait.lua's:
--   1 owner            a permit granted by this call
--   2 owner            one the caller held already (its ttl restarted)
--   3 ttl place now    this call queued ARGV[4] (at ARGV[5] if given)
--   0 ttl place now    the previous entry is still queued, or the caller
--                      does not queue (place '')
--   4 0 place now      dead entries are still ahead of the first live
--                      waiter: attempt again at once
-- With codes 1 and 2 the caller's entries leave the queue. ttl is the ms
-- until the first live permit expires, now the server clock in µs. An
-- error reply 'LIMIT n' when the live permits were granted under another
-- limit, n.
local s, err = enter(ARGV[3], ARGV[7])
if not s then
  return redis.error_reply(err)
end
local code, place, now = 0, '', ''
if s.count > 0 and renew(s) then
  redis.call('ZREM', KEYS[2], ARGV[4], ARGV[6])
  return '2 ' .. ARGV[1]
elseif ARGV[4] ~= '' then
  code, place, now = enqueue(KEYS[2], s.now, ARGV[4], ARGV[5], ARGV[6])
end
if serve(s, ARGV[4], ARGV[6], ARGV[4] == '') then
  redis.call('ZREM', KEYS[2], ARGV[4], ARGV[6])
  return '1 ' .. ARGV[1]
end
if s.scan.more then
  return '4 0 ' .. place .. ' ' .. now
end
local ttl = first(s)
if ARGV[4] == '' then
  if not s.marked then
    mark(s, true, s.expiry)
  end
  return '0 ' .. ttl .. '  '
end
-- The queue outlives the first permit by LINGER; every attempt of a waiter
-- extends it.
redis.call('PEXPIRE', KEYS[2], ttl + LINGER)
return code .. ' ' .. ttl .. ' ' .. place .. ' ' .. now
