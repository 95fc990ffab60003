-- fenced_acquire: take a free correctness lock with a new fencing token, or say
-- how long its holder keeps it. (grant.lua is prepended.)
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's wait queue key (unused here: the KEYS are the same as
--          the other scripts that grant the lock, so that a caller builds
--          them once)
-- KEYS[3]  the lock's fence counter key (same cluster slot as KEYS[1])
-- ARGV[1]  the caller's owner id (must not contain ':')
-- ARGV[2]  the lease ttl in milliseconds
-- ARGV[3]  the lock's kind: 'f' for the counter alone, 'c' with the clock
--          floor, 't' with the clock floor and a counter that expires with
--          the lease (see grant in grant.lua)
--
-- Reply, when the lock is the caller's: the grant's token as a decimal string.
-- The token is max(counter + 1, server clock in microseconds) with the clock
-- floor, counter + 1 without; it is stored back into the counter and in the lock
-- value as "owner:token". A retried call by the same owner gets the same token
-- back, never a second one. Otherwise the reply is an integer: the holder's
-- remaining ttl in milliseconds (at least 1), or -1 when the key has no expiry.
-- A fence counter that holds no token is an error reply starting BADFENCE,
-- and nothing is changed.

-- grant checks the lock is free with GET, or takes it with SET NX, never
-- with MGET: MGET reads a key of another type as nil, and the lock would be
-- granted over it; GET and SET fail with WRONGTYPE.
local value, token = grant(KEYS[1], KEYS[3], ARGV[1], ARGV[2], ARGV[3])
if value then
  return token
elseif value == nil then
  return redis.error_reply(token)
end
local holder, mine = token, ARGV[1] .. ':'
if string.sub(holder, 1, #mine) == mine then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  -- Without the mark of queued waiters (see wait.lua).
  return (string.gsub(string.sub(holder, #mine + 1), '%*$', ''))
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl == 0 then
  return 1
end
return ttl
