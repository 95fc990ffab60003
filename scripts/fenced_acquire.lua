-- fenced_acquire: take a free correctness lock with a new fencing token, or
-- say how long its holder keeps it. (grant.lua is prepended.)
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
-- holder = owner:token [* expiry], the mark of waiters (handoff.go)
local holder, expiry, mine = token, nil, ARGV[1] .. ':'
local star = string.find(holder, '*', 1, true)
if star then
  expiry = tonumber(string.sub(holder, star + 1))
  holder = string.sub(holder, 1, star - 1)
end
local ms
if expiry then
  local now = redis.call('TIME')
  ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  if expiry <= ms then
    return 0
  end
end
if string.sub(holder, 1, #mine) == mine then
  if expiry then
    redis.call('SET', KEYS[1], holder .. '*' .. string.format('%d', ms + tonumber(ARGV[2])), 'PX', tonumber(ARGV[2]) + 10000)
  else
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
  return string.sub(holder, #mine + 1)
elseif expiry then
  return math.max(expiry - ms, 1)
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl == 0 then
  return 1
end
return ttl
