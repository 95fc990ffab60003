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
-- ARGV[4]  '1' to publish the wake-up for waiters that do not queue when the
--          lock is deleted; '0' from a Locker whose waiters queue, sparing
--          an uncontended release a command
--
-- Reply: 0 when the caller does not hold the lock (it expired, or another
-- owner holds it now), and then nothing else is changed; 1 when the lock was
-- released and deleted; when it was handed to a waiter, 2 for an efficiency
-- grant, and the new token, as a decimal string, for a correctness grant.
--
-- The handoff: pop the first entry, "owner ttl kind ticket channel". When
-- nobody is subscribed to its channel (PUBSUB NUMSUB, which unlike PUBLISH's
-- count leaves pattern subscribers out), the waiter's Locker is gone (its
-- process died, or the waiter left and its Locker has no other waiter), and
-- the next entry is tried, so a vanished waiter does not hold up the queue.
-- Otherwise grant the lock to it as wait.lua would (of the kind the entry
-- names, whatever the kind of the releaser) and publish "ticket token place
-- waited" on the channel: ticket is the waiter's random id for its Locker
-- (not its owner id, which would let a mere subscriber release the lock),
-- token is the new token or '-', place the entry's score, and waited the
-- microseconds since it. NUMSUB counts only clients of this server, so Redis
-- Cluster clients do not queue (see internal/lease).
--
-- With no live waiter left the key is deleted, and (ARGV[4]) a wake-up goes
-- to KEYS[1] .. ':wake' for waiters that do not queue: a plain PUBLISH, which
-- in Redis Cluster reaches every node over the cluster bus.
if ARGV[3] ~= '' then
  redis.call('ZREM', KEYS[2], ARGV[3])
end
local held = redis.call('GET', KEYS[1])
if not held then
  return 0
end
if ARGV[2] == '1' then
  if #ARGV[1] < 2 or string.sub(ARGV[1], -1) ~= ':' or string.sub(held, 1, #ARGV[1]) ~= ARGV[1] then
    return 0
  end
elseif held ~= ARGV[1] then
  return 0
end
local grant, micros, now
while true do
  local head = redis.call('ZPOPMIN', KEYS[2])
  if #head == 0 then
    break
  end
  if not grant then
    grant, micros = grantlib()
    -- One reading, before any grant: Redis 7.2 and later count a PX set
    -- inside a script from the script's start, so a wait measured to a later
    -- reading would make the new holder's lease outlast its key.
    now = tonumber(micros())
  end
  local owner, ttl, kind, ticket, channel = string.match(head[1], '^([^ ]+) (%d+) ([efc]) ([^ ]+) (.+)$')
  if owner and redis.call('PUBSUB', 'NUMSUB', channel)[2] > 0 then
    local _, token = grant(KEYS[1], KEYS[3], owner, ttl, kind)
    local waited = math.max(now - tonumber(head[2]), 0)
    redis.call('PUBLISH', channel, ticket .. ' ' .. (token or '-') .. ' ' .. head[2] .. ' ' .. string.format('%d', waited))
    return token or 2
  end
end
redis.call('DEL', KEYS[1])
if ARGV[4] == '1' then
  redis.call('PUBLISH', KEYS[1] .. ':wake', '')
end
return 1
