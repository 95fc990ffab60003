-- fenced_acquire: take a free correctness lock with a new fencing token, or
-- say how long its holder keeps it. (prelude.lua and grant.lua are
-- prepended.)
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's wait queue (unused: the KEYS of every granting script)
-- KEYS[3]  the lock's fence counter key
-- ARGV[1]  the caller's owner id
-- ARGV[2]  the lease ttl in milliseconds
-- ARGV[3]  the lock's kind: 'f', 'c' or 't' (see grant.lua)
--
-- Reply when the lock is the caller's: the grant's token, a decimal string
-- (a retried call by the same owner gets the same token back). Otherwise
-- the holder's remaining ttl in ms (at least 1; -1 without expiry), or:
--   0   the holder's lease lapsed with waiters queued, which the wait
--       script serves first
-- A counter that holds no token: an error reply starting BADFENCE, nothing
-- changed.
local value, token = grant(ARGV[1], ARGV[2], ARGV[3])
if value then
  return token
elseif value == nil then
  return redis.error_reply(token)
end
local holder, _, left, now = read_value(token)
if left == 0 then
  return 0
end
local mine = ARGV[1] .. ':'
if string.sub(holder, 1, #mine) == mine then
  restart(holder, ARGV[2], now)
  return string.sub(holder, #mine + 1)
elseif left then
  return left
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl == 0 then
  return 1
end
return ttl
