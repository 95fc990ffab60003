-- release: end the caller's grant, handing the lock to the first live waiter
-- in its queue, or deleting it and waking the waiters that do not queue. A
-- lock whose lease lapsed (its holder died or froze, with waiters queued) is
-- served the same way, whoever calls. (grant.lua and queue.lua are
-- prepended.) The value with its mark, the queue entry and the grant message
-- are specified in internal/lease/handoff.go; docs/waiting.md tells the
-- strategy.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's wait queue
-- KEYS[3]  the lock's fence counter key
-- ARGV[1]  the value the caller's grant stored; with ARGV[2] = '1', its
--          "owner:" prefix (a prefix not ending in ':' matches nothing)
-- ARGV[2]  '1' to match ARGV[1] as a prefix, '2' to end whatever grant
--          the lock holds (an operator's break), else '0': exactly
-- KEYS[4]  with '2', an election's leader key, optional: the broken
--          holder's term is cleared from it, and its observers told
-- ARGV[3]  a queue entry to remove first (a waiter giving up), or ''
-- ARGV[4]  '1' when grant channels are sharded (Redis Cluster), else '0'
-- ARGV[5]  another entry to remove with ARGV[3] (its next one), optional
--
-- Reply:
--   1   the lock was deleted
--   2   it was handed to a waiter, as an efficiency grant (a fenced grant
--       replies its new token, a decimal string)
--   0   the caller's lease is gone (the key is, or the lease lapsed)
--   -1  another owner holds it (nothing changed)
--   3   released, with dead entries still ahead of the first live waiter:
--       the lock is left vacant, and the caller calls again (with ARGV[1]
--       '') to go on
--   -2  gone, with dead entries ahead: likewise
--   {0, token}  the caller's lease had lapsed, and this call handed the lock
--       to the first live waiter, with that grant's token ('-' for an
--       efficiency grant)
if ARGV[3] ~= '' then
  redis.call('ZREM', KEYS[2], ARGV[3], ARGV[5] or ARGV[3])
end
local held = redis.call('GET', KEYS[1])
if not held then
  return 0
end
local star = string.find(held, '*', 1, true)
local now, gone
if star then
  local expiry = tonumber(string.sub(held, star + 1))
  held = string.sub(held, 1, star - 1)
  if expiry then
    now = redis.call('TIME')
    gone = expiry <= tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  end
end
if gone then
  -- The lease lapsed: nobody's to release, and the queue is served below.
elseif ARGV[2] == '2' then
  local colon = KEYS[4] and string.find(held, ':', 1, true)
  if colon and redis.call('HGET', KEYS[4], 'grant') == held then
    redis.call('DEL', KEYS[4])
    redis.call('PUBLISH', KEYS[4], 'vacant ' .. string.sub(held, colon + 1))
  end
elseif ARGV[2] == '1' then
  if #ARGV[1] < 2 or string.sub(ARGV[1], -1) ~= ':' or string.sub(held, 1, #ARGV[1]) ~= ARGV[1] then
    return -1
  end
elseif held ~= ARGV[1] then
  return -1
end
if star then
  local scan, publish = scanning(ARGV[4])
  local w
  w, now = next_waiter(KEYS[2], now, scan)
  local value, token
  if w then
    value, token = grant(KEYS[1], KEYS[3], w.owner, w.ttl, w.kind, now, true, true)
  end
  if value then
    announce(publish, w, token or '-', now)
    if gone then
      return {0, token or '-'}
    end
    return token or 2
  elseif scan.more then
    -- Dead entries left ahead: nobody takes the lock until they are gone
    -- (the vacant value, handoff.go).
    redis.call('SET', KEYS[1], '*0', 'PX', 10000)
    return gone and -2 or 3
  elseif w then
    -- A counter that holds no token: the waiter gets its bare ticket (no
    -- grant) and meets the error itself; the lock is deleted below.
    redis.call('ZADD', KEYS[2], w.place, w.entry)
    redis.call('PEXPIRE', KEYS[2], 10000)
    redis.call(publish, w.channel, w.ticket)
  end
end
redis.call('DEL', KEYS[1])
if star then
  redis.call('PUBLISH', KEYS[1] .. ':wake', '')
end
if gone then
  return 0
end
return 1
