-- release: end the caller's grant, handing the lock to the first live waiter
-- in its queue, or deleting it and waking the waiters that do not queue.
-- (grant.lua and queue.lua are prepended.) The queue entry, the grant
-- message and the mark are specified in internal/lease/handoff.go;
-- docs/waiting.md tells the strategy.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's wait queue
-- KEYS[3]  the lock's fence counter key
-- ARGV[1]  the value the caller's grant stored; with ARGV[2] = '1', its
--          "owner:" prefix (a prefix not ending in ':' matches nothing)
-- ARGV[2]  '1' to match ARGV[1] as a prefix, else exactly
-- ARGV[3]  a queue entry to remove first (a waiter giving up), or ''
-- ARGV[4]  '1' when grant channels are sharded (Redis Cluster), else '0'
-- ARGV[5]  another entry to remove with ARGV[3] (its next one), optional
--
-- Reply: 0 when the key is gone, -1 when another owner holds it (nothing
-- changed); 1 when the lock was deleted; when handed to a waiter, 2 for an
-- efficiency grant, the new token (a decimal string) for a fenced one.
if ARGV[3] ~= '' then
  redis.call('ZREM', KEYS[2], ARGV[3], ARGV[5] or ARGV[3])
end
local held = redis.call('GET', KEYS[1])
if not held then
  return 0
end
local queued = string.byte(held, -1) == 42
if queued then
  held = string.sub(held, 1, -2)
end
if ARGV[2] == '1' then
  if #ARGV[1] < 2 or string.sub(ARGV[1], -1) ~= ':' or string.sub(held, 1, #ARGV[1]) ~= ARGV[1] then
    return -1
  end
elseif held ~= ARGV[1] then
  return -1
end
local numsub, publish = 'NUMSUB', 'PUBLISH'
if ARGV[4] == '1' then
  numsub, publish = 'SHARDNUMSUB', 'SPUBLISH'
end
if queued then
  local w, now = next_waiter(KEYS[2], nil, numsub)
  local value, token
  if w then
    value, token = grant(KEYS[1], KEYS[3], w.owner, w.ttl, w.kind, now, true, true)
  end
  if value then
    announce(publish, w, token or '-', now)
    return token or 2
  elseif w then
    -- A counter that holds no token: the waiter gets its bare ticket (no
    -- grant) and meets the error itself; the lock is deleted below.
    redis.call('ZADD', KEYS[2], w.place, w.entry)
    redis.call('PEXPIRE', KEYS[2], 10000)
    redis.call(publish, w.channel, w.ticket)
  end
end
redis.call('DEL', KEYS[1])
if queued then
  redis.call('PUBLISH', KEYS[1] .. ':wake', '')
end
return 1
