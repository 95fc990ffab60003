-- release: end the caller's grant, handing the lock straight to the first
-- live waiter in its queue, or deleting it and waking waiters that do not
-- queue. (grant.lua is prepended.)
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's wait queue (see wait.lua)
-- KEYS[3]  the lock's fence counter key
-- ARGV[1]  the value the caller's grant stored (owner id, or owner id:token);
--          with ARGV[2] = '1', its "owner id:" prefix, when the token of a
--          grant whose reply was lost is unknown (a prefix not ending in ':',
--          or empty, matches nothing)
-- ARGV[2]  '1' to match ARGV[1] as a prefix, else exactly
-- ARGV[3]  a queue entry to remove first (a waiter giving up), or ''
-- ARGV[4]  '1' when the queue's grant channels are sharded (Redis Cluster:
--          each hashes to the lock's slot, and lives on its master), else '0'
--          (one server)
--
-- Reply: when the caller does not hold the lock, 0 if the key is gone
-- (expired or deleted) and -1 if another owner holds it, and then nothing
-- else is changed; 1 when the lock was released and deleted; when it was
-- handed to a waiter, 2 for an efficiency grant, and the new token, as a
-- decimal string, for a correctness grant.
--
-- The handoff, only when the lock's value carries the mark of waiters
-- (a trailing '*', which wait.lua adds; internal/lease/handoff.go): pop the
-- first entry, "owner ttl kind ticket channel" (the grammar is in
-- internal/lease/handoff.go); one that does not parse is dropped. When nobody
-- is subscribed to its channel (PUBSUB NUMSUB, or SHARDNUMSUB for a sharded
-- one, which unlike PUBLISH's count leave pattern subscribers out), the
-- waiter's Locker is gone (its process died, or the waiter left and its
-- Locker has no other waiter), and the next entry is tried, so a vanished
-- waiter does not hold up the queue. Otherwise grant the lock to it as
-- wait.lua would (of the kind the entry names, whatever the kind of the
-- releaser) and publish "ticket token place seconds micros" on the channel:
-- ticket is the waiter's random id for its Locker (not its owner id, which
-- would let a mere subscriber release the lock), token is the new token or
-- '-', place the entry's score (the server clock in microseconds when it
-- queued), and seconds and micros the server clock at the grant, as TIME
-- gives them; SPUBLISH for a sharded channel. Both counts are of this
-- server's clients: in Redis Cluster, waiters subscribe their sharded grant
-- channels on the lock's master, where this runs. A correctness grant whose fence
-- counter holds no token (grant.lua) must not keep the caller's lock: the
-- entry goes back in the queue, its waiter gets its bare ticket (which is no
-- grant: it tries again and meets the error itself), and the lock is
-- deleted as below.
--
-- With no live waiter left the key is deleted, and when it was marked a
-- wake-up goes to KEYS[1] .. ':wake' for waiters that do not queue (a Ring's,
-- a Redis 6 cluster's, WithReplicas Lockers'), which mark the lock as they
-- wait: a plain PUBLISH, which in Redis Cluster reaches every node over the
-- cluster bus.
if ARGV[3] ~= '' then
  redis.call('ZREM', KEYS[2], ARGV[3])
end
local held = redis.call('GET', KEYS[1])
if not held then
  return 0
end
-- A value ending with '*' says waiters have waited for this grant (wait.lua
-- marks it; internal/lease/handoff.go): only then is there a queue to look
-- at, or a waiter to wake, so a release of a lock nobody waited for is a GET
-- and a DEL.
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
local now
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
    -- One reading, before any grant: Redis 7.2 and later count a PX set
    -- inside a script from the script's start, so a wait measured to a later
    -- reading would make the new holder's lease outlast its key.
    now = redis.call('TIME')
  end
  -- Split the entry with plain finds, not a pattern, and leave arithmetic
  -- to the waiter: Lua's pattern matcher, string.format and tonumber each
  -- cost a handoff microseconds when Redis wakes from idle.
  local e = head[1]
  local a = string.find(e, ' ', 1, true)
  local b = a and string.find(e, ' ', a + 1, true)
  local c = b and string.find(e, ' ', b + 1, true)
  local d = c and string.find(e, ' ', c + 1, true)
  local kind = d and string.sub(e, b + 1, c - 1)
  local ttl = d and string.sub(e, a + 1, b - 1) or ''
  local valid = d and a > 1 and d > c + 1 and d < #e and #ttl > 0 and #ttl < 16 and
      (kind == 'e' or kind == 'f' or kind == 'c' or kind == 't')
  -- A ttl is digits without a leading zero: PX refuses 0, and the script
  -- must not fail once the entry is popped.
  for i = 1, valid and #ttl or 0 do
    local digit = string.byte(ttl, i)
    valid = valid and digit >= (i == 1 and 49 or 48) and digit <= 57
  end
  local channel = valid and string.sub(e, d + 1)
  if valid and redis.call('PUBSUB', numsub, channel)[2] > 0 then
    local value, token = grant(KEYS[1], KEYS[3], string.sub(e, 1, a - 1), ttl, kind, now, true, true)
    local ticket = string.sub(e, c + 1, d - 1)
    if not value then
      redis.call('ZADD', KEYS[2], head[2], e)
      redis.call('PEXPIRE', KEYS[2], 10000)
      redis.call(publish, channel, ticket)
      break
    end
    redis.call(publish, channel, ticket .. ' ' .. (token or '-') .. ' ' .. head[2] .. ' ' .. now[1] .. ' ' .. now[2])
    return token or 2
  end
end
redis.call('DEL', KEYS[1])
if queued then
  redis.call('PUBLISH', KEYS[1] .. ':wake', '')
end
return 1
