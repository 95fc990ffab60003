-- fenced_acquire: take a free correctness lock with a new fencing token, or say
-- how long its holder keeps it.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's fence counter key (same cluster slot as KEYS[1])
-- ARGV[1]  the caller's owner id (must not contain ':')
-- ARGV[2]  the lease ttl in milliseconds
-- ARGV[3]  '1' to apply the clock floor, '0' to use the counter alone
--
-- Reply, when the lock is the caller's: the grant's token as a decimal string.
-- The token is max(counter + 1, server clock in microseconds) with the clock
-- floor, counter + 1 without; it is stored back into the counter and in the lock
-- value as "owner:token". A retried call by the same owner gets the same token
-- back, never a second one. Otherwise the reply is an integer: the holder's
-- remaining ttl in milliseconds (at least 1), or -1 when the key has no expiry.
--
-- Tokens never pass through tostring(): Lua numbers are doubles and print with
-- %.14g, which would round a 16-digit token. They stay decimal strings, compared
-- by length and then by text.
-- greater compares two decimal integers held as strings; b may be a
-- (corrupt) negative counter.
local function greater(a, b)
  if string.sub(b, 1, 1) == '-' then
    return true
  end
  if #a ~= #b then
    return #a > #b
  end
  return a > b
end

-- incr bumps the counter and returns it as a decimal string. INCR's reply is
-- a Lua number, exact below 2^53 and printed exactly by '%d'; above that, the
-- string comes from Redis itself.
local function incr(key)
  local n = redis.call('INCR', key)
  if n < 9007199254740992 then
    return string.format('%d', n)
  end
  return redis.call('GET', key)
end

-- Two GETs, not one MGET: MGET reads a key of another type as nil, and the
-- lock would be granted over it; GET fails with WRONGTYPE.
local holder = redis.call('GET', KEYS[1])
if holder then
  local mine = ARGV[1] .. ':'
  if string.sub(holder, 1, #mine) == mine then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return string.sub(holder, #mine + 1)
  end
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl == 0 then
    return 1
  end
  return ttl
end

local counter = redis.call('GET', KEYS[2])
local token
if ARGV[3] == '1' then
  local now = redis.call('TIME')
  local micros = now[1] .. string.format('%06d', tonumber(now[2]))
  if not counter or greater(micros, counter) then
    token = micros
    redis.call('SET', KEYS[2], token)
  end
end
if not token then
  token = incr(KEYS[2])
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. token, 'PX', ARGV[2])
return token
