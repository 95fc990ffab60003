-- release: delete the lock if the caller still holds it, and wake waiters.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the value the caller's grant stored (owner id, or owner id:token);
--          with ARGV[3] = '1', its "owner id:" prefix, when the token of a
--          grant whose reply was lost is unknown (a prefix not ending in ':',
--          or empty, matches nothing)
-- ARGV[2]  the wake-up channel of this lock
-- ARGV[3]  '1' to match ARGV[1] as a prefix, else exactly
--
-- Reply: 1 when the lock was released; 0 when the caller does not hold it (it
-- expired, or another owner holds it now), and then nothing is changed.
--
-- The wake-up is a plain PUBLISH: in Redis Cluster it reaches every node over
-- the cluster bus, so one subscription per client serves keys of every shard.
local held = redis.call('GET', KEYS[1])
if not held then
  return 0
end
if ARGV[3] == '1' then
  if #ARGV[1] < 2 or string.sub(ARGV[1], -1) ~= ':' or string.sub(held, 1, #ARGV[1]) ~= ARGV[1] then
    return 0
  end
elseif held ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], '')
return 1
