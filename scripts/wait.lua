-- wait: one attempt of a waiting Obtain or Acquire. Take the lock when it is
-- free (or already the caller's), else join its wait queue, from which the
-- holder's release hands the lock straight to the first live waiter
-- (release.lua). (grant.lua is prepended.)
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's wait queue: a sorted set of entries by arrival (server
--          clock in microseconds, kept increasing); same cluster slot as KEYS[1]
-- KEYS[3]  the lock's fence counter key
-- ARGV[1]  the caller's owner id (must not contain ':' or ' ')
-- ARGV[2]  the lease ttl in milliseconds
-- ARGV[3]  the caller's queue entry, "owner ttl kind ticket channel" (the
--          grammar is in internal/lease/handoff.go; release.lua parses it)
-- ARGV[4]  the lock's kind as the caller runs it, as in the entry (see grant
--          in grant.lua)
--
-- Reply, when the lock is the caller's: {1, value} for a grant made by this
-- call, {2, value} for one the caller had already (handed over by a release,
-- or made by an earlier send of this call), value as stored in the key (the
-- owner id, or "owner:token"). A grant the caller had already has its ttl
-- restarted, so that the caller can measure its lease from this call. The
-- caller's entry leaves the queue. A fence counter that holds no token is an
-- error reply starting BADFENCE, and the lock is not granted.
--
-- Otherwise {0, ttl, place}: ttl is the holder's remaining ttl in ms (at least
-- 1; -1 when the key has no expiry), and place is the entry's score when this
-- call added it, or '' when the entry was queued already.
local held = redis.call('GET', KEYS[1])
if not held then
  local grant = grantlib()
  local value, bad = grant(KEYS[1], KEYS[3], ARGV[1], ARGV[2], ARGV[4])
  if not value then
    return redis.error_reply(bad)
  end
  redis.call('ZREM', KEYS[2], ARGV[3])
  return {1, value}
end
local mine = held == ARGV[1]
if ARGV[4] ~= 'e' then
  mine = string.sub(held, 1, #ARGV[1] + 1) == ARGV[1] .. ':'
end
if mine then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('ZREM', KEYS[2], ARGV[3])
  return {2, held}
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl == 0 then
  ttl = 1
end
-- The place is the server clock, or just after the last entry when the
-- clock has not moved past it (a coarse or frozen clock, as in tests), so
-- that arrival order holds whatever the clock does.
local place = ''
if not redis.call('ZSCORE', KEYS[2], ARGV[3]) then
  local _, micros = grantlib()
  local now = tonumber(micros())
  local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
  if #last == 2 and tonumber(last[2]) >= now then
    now = tonumber(last[2]) + 1
  end
  place = string.format('%d', now)
  redis.call('ZADD', KEYS[2], place, ARGV[3])
end
-- Keep the queue for the holder's remaining ttl and ten seconds more. A
-- waiter tries again (and so comes back here) by the time the holder's ttl
-- runs out, so the queue outlives every live waiter, and the release need not
-- extend it; a queue left behind by waiters that vanished expires on its own.
-- A holder without an expiry keeps the queue without one.
if ttl < 0 then
  redis.call('PERSIST', KEYS[2])
else
  -- The queue exists here (the entry is in it), so left is -1 (no
  -- expiry) or its ttl.
  local left = redis.call('PTTL', KEYS[2])
  if left < ttl + 10000 then
    redis.call('PEXPIRE', KEYS[2], ttl + 10000)
  end
end
return {0, ttl, place}
