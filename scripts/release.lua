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
--
-- Reply: 0 when the caller does not hold the lock (it expired, or another
-- owner holds it now), and then nothing else is changed; 1 when the lock was
-- released and deleted; when it was handed to a waiter, 2 for an efficiency
-- grant, and the new token, as a decimal string, for a correctness grant.
--
-- The handoff: pop the first entry, grant the lock to it as wait.lua would
-- (of the kind the entry names, whatever the kind of the releaser), and publish "value place waited" on the entry's channel (place: the
-- entry's score; waited: microseconds since it). PUBLISH counts the clients
-- that receive it: 0 means the waiter's Locker is no longer listening (its
-- process died, or the waiter left), and the next entry is tried, so a
-- vanished waiter never holds up the queue. PUBLISH counts only clients of
-- this server, so Redis Cluster clients do not queue (see internal/lease).
--
-- With no live waiter left the key is deleted, and a wake-up goes to
-- KEYS[1] .. ':wake' for waiters that do not queue: a plain PUBLISH, which in
-- Redis Cluster reaches every node over the cluster bus.
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
local grant, micros, keepQueue
while true do
  local head = redis.call('ZPOPMIN', KEYS[2])
  if #head == 0 then
    break
  end
  local owner, ttl, kind, channel = string.match(head[1], '^([^ ]+) (%d+) ([efc]) (.+)$')
  if owner then
    if not grant then
      grant, micros, keepQueue = grantlib()
    end
    local value, token = grant(KEYS[1], KEYS[3], owner, ttl, kind)
    local waited = math.max(tonumber(micros()) - tonumber(head[2]), 0)
    local message = value .. ' ' .. head[2] .. ' ' .. string.format('%d', waited)
    if redis.call('PUBLISH', channel, message) > 0 then
      keepQueue(KEYS[2], tonumber(ttl))
      return token or 2
    end
  end
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', KEYS[1] .. ':wake', '')
return 1
