-- release: end the caller's grant, handing the lock to the first live waiter
-- in its queue, or deleting it and waking the waiters that do not queue.
-- (grant.lua is prepended.) The queue entry, the grant message and the mark
-- are specified in internal/lease/handoff.go; docs/waiting.md tells the
-- strategy.
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
local now, us
local numsub, publish = 'NUMSUB', 'PUBLISH'
if ARGV[4] == '1' then
  numsub, publish = 'SHARDNUMSUB', 'SPUBLISH'
end
while queued do
  local head = redis.call('ZPOPMIN', KEYS[2])
  if #head == 0 then
    break
  end
  if not now then
    -- One reading before any grant: Redis 7.2+ counts a PX set in a script
    -- from the script's start.
    now = redis.call('TIME')
    us = tonumber(now[1]) * 1000000 + tonumber(now[2])
  end
  -- entry = owner SP ttl SP kind SP patience SP ticket SP channel; one that
  -- does not parse is dropped.
  local e = head[1]
  local a = string.find(e, ' ', 1, true)
  local b = a and string.find(e, ' ', a + 1, true)
  local c = b and string.find(e, ' ', b + 1, true)
  local d = c and string.find(e, ' ', c + 1, true)
  local f = d and string.find(e, ' ', d + 1, true)
  local kind = f and string.sub(e, b + 1, c - 1)
  local ttl = f and string.sub(e, a + 1, b - 1) or ''
  local patience = f and tonumber(string.sub(e, c + 1, d - 1))
  local valid = f and a > 1 and f > d + 1 and f < #e and patience and patience >= 0 and
      #ttl > 0 and #ttl < 16 and (kind == 'e' or kind == 'f' or kind == 'c' or kind == 't')
  -- PX refuses 0: a ttl is digits without a leading zero.
  for i = 1, valid and #ttl or 0 do
    local digit = string.byte(ttl, i)
    valid = valid and digit >= (i == 1 and 49 or 48) and digit <= 57
  end
  -- A waiter whose patience ran out has given up: skip it.
  if valid and patience > 0 and us > tonumber(head[2]) + patience * 1000 then
    valid = false
  end
  local channel = valid and string.sub(e, f + 1)
  if valid and redis.call('PUBSUB', numsub, channel)[2] > 0 then
    local value, token = grant(KEYS[1], KEYS[3], string.sub(e, 1, a - 1), ttl, kind, now, true, true)
    local ticket = string.sub(e, d + 1, f - 1)
    if not value then
      -- A counter that holds no token: the waiter gets its bare ticket (no
      -- grant) and meets the error itself; the lock is deleted below.
      redis.call('ZADD', KEYS[2], head[2], e)
      redis.call('PEXPIRE', KEYS[2], 10000)
      redis.call(publish, channel, ticket)
      break
    end
    redis.call(publish, channel, ticket .. ' ' .. (token or '-') .. ' ' .. now[1] .. ' ' .. now[2])
    return token or 2
  end
end
redis.call('DEL', KEYS[1])
if queued then
  redis.call('PUBLISH', KEYS[1] .. ':wake', '')
end
return 1
