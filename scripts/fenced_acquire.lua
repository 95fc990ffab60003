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
-- Reply, a string of fields as wait.lua's (place and now empty):
--   1 value            the lock is the caller's: value is its grant,
--                      owner:token (a retried call by the same owner gets
--                      the same token back)
--   0 ttl place now    another owner holds it for ttl ms more (at least 1;
--                      -1 without expiry)
--   4 0 place now      the holder's lease lapsed with waiters queued, which
--                      the wait script serves first
-- A counter that holds no token: an error reply starting BADFENCE, nothing
-- changed.
local value, token = grant(ARGV[1], ARGV[2], ARGV[3])
if value then
  return '1 ' .. value
elseif value == nil then
  return redis.error_reply(token)
end
-- Not granted: the functions that read the holder's lease are built from
-- here on (scripts.go).
-- (shared functions)
local holder, _, left, now = read_value(token)
if left == 0 then
  return '4 0  '
end
local mine = ARGV[1] .. ':'
if string.sub(holder, 1, #mine) == mine then
  restart(holder, ARGV[2], now)
  return '1 ' .. holder
elseif left then
  return '0 ' .. left .. '  '
end
local ttl = redis.call('PTTL', KEYS[1])
return '0 ' .. (ttl == 0 and 1 or ttl) .. '  '
