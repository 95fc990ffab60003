-- wait: one attempt of a waiting acquire: take the lock if it is free (or
-- the caller's already) and nobody is queued ahead, else queue the caller,
-- or only mark the lock for a waiter that does not queue. A lock that is
-- free, or whose lease lapsed with waiters queued (its holder died or
-- froze), goes first to the first live waiter in the queue, exactly as a
-- release would hand it. (prelude.lua, grant.lua and queue.lua are
-- prepended.) The value with its mark, the queue entry and the grant
-- message are specified in scripts/wire.go.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's wait queue (a sorted set of entries by place)
-- KEYS[3]  the lock's fence counter key
-- ARGV[1]  the caller's owner id
-- ARGV[2]  the lease ttl in milliseconds
-- ARGV[3]  the lock's kind (see grant.lua)
-- ARGV[4]  the entry to queue, or '' for a waiter that does not queue
-- ARGV[5]  the place of the caller's previous entry, or '' if it has none
-- ARGV[6]  that previous entry, or ''
-- ARGV[7]  '1' when grant channels are sharded (Redis Cluster), else '0'
--
-- Reply, a string of fields, each after one space, the code first (a
-- field may be empty; a value, last, is the rest of the string):
--   1 value            the lock is the caller's, granted by this call
--   2 value            it was the caller's already (its ttl restarted)
--   3 ttl place now    this call queued ARGV[4] (at ARGV[5] if given: the
--                      previous entry was gone)
--   0 ttl place now    the previous entry is still queued (it stays), or
--                      the caller does not queue (place '')
--   4 0 place now      the lock is free, but dead entries are still ahead
--                      of the first live waiter: attempt again at once
-- value is the grant's, without the mark; with codes 1 and 2 the caller's
-- entries leave the queue. ttl is the holder's remaining ms (-1: no
-- expiry), now the server clock in µs. When this call handed the lock to
-- the first live waiter (it found the lock free, or its lease lapsed), a
-- fifth field follows codes 0 and 3: the token of that grant ('-' for an
-- efficiency grant). A counter that holds no token: an error reply starting
-- BADFENCE.
local now = redis.call('TIME')
local held = redis.call('GET', KEYS[1])
local marked, left
if held then
  held, marked, left = read_value(held, now)
  if left == 0 then
    held = nil -- the lease lapsed: served below, as a release would
  end
end
local code, place, us = 0, '', ''
if not held then
  -- A waiter queued before keeps its place (put back if it was lost);
  -- a new one queues behind whoever goes first.
  if ARGV[5] ~= '' then
    code, place, us = enqueue(KEYS[2], now, ARGV[4], ARGV[5], ARGV[6])
  end
  local scan, publish = scanning(ARGV[7])
  local w = next_waiter(KEYS[2], now, scan, ARGV[4], ARGV[6])
  if scan.more then
    -- Dead entries are left ahead: nobody takes the lock until they are
    -- gone (the vacant value, wire.go).
    redis.call('SET', KEYS[1], '*0', 'PX', LINGER)
    return '4 0 ' .. place .. ' ' .. us
  elseif not w or w.mine then
    local value, bad = grant(ARGV[1], ARGV[2], ARGV[3], now)
    if not value then
      redis.call('DEL', KEYS[1])
      return redis.error_reply(bad)
    end
    redis.call('ZREM', KEYS[2], ARGV[4], ARGV[6])
    return '1 ' .. value
  end
  local value, token = grant(w.owner, w.ttl, w.kind, now)
  if not value then
    -- A counter that holds no token: the waiter gets its bare ticket (no
    -- grant) and meets the error itself, as from a release.
    redis.call('ZADD', KEYS[2], w.place, w.entry)
    redis.call(publish, w.channel, w.ticket)
    redis.call('DEL', KEYS[1])
    return redis.error_reply(token)
  end
  announce(publish, w, token or '-', now)
  local ttl = tonumber(w.ttl)
  if ARGV[4] == '' then
    return '0 ' .. ttl .. '   ' .. (token or '-')
  elseif ARGV[5] == '' then
    code, place, us = enqueue(KEYS[2], now, ARGV[4], ARGV[5], ARGV[6])
  end
  if redis.call('PTTL', KEYS[2]) < ttl + LINGER then
    redis.call('PEXPIRE', KEYS[2], ttl + LINGER)
  end
  return code .. ' ' .. ttl .. ' ' .. place .. ' ' .. us .. ' ' .. (token or '-')
end
local mine = held == ARGV[1]
if ARGV[3] ~= 'e' then
  mine = string.sub(held, 1, #ARGV[1] + 1) == ARGV[1] .. ':'
end
if mine then
  restart(held, ARGV[2], left and now)
  redis.call('ZREM', KEYS[2], ARGV[4], ARGV[6])
  return '2 ' .. held
end
local ttl = left
if marked and not left then
  ttl = -1 -- marked, without expiry: a key set by hand
elseif not marked then
  -- Mark it: from now on the key outlives the lease by LINGER, so that
  -- nobody takes it with a plain SET NX before the queue is served.
  ttl = redis.call('PTTL', KEYS[1])
  if ttl == 0 then
    ttl = 1
  end
  if ttl < 0 then
    redis.call('SET', KEYS[1], held .. '*', 'KEEPTTL')
  else
    restart(held, ttl, now)
  end
end
if ARGV[4] == '' then
  return '0 ' .. ttl .. '  '
end
code, place, us = enqueue(KEYS[2], now, ARGV[4], ARGV[5], ARGV[6])
-- The queue outlives the holder by LINGER; every attempt of a waiter
-- extends it.
if ttl < 0 then
  redis.call('PERSIST', KEYS[2])
elseif redis.call('PTTL', KEYS[2]) < ttl + LINGER then
  redis.call('PEXPIRE', KEYS[2], ttl + LINGER)
end
return code .. ' ' .. ttl .. ' ' .. place .. ' ' .. us
