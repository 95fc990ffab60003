-- wait: one attempt of a waiting Obtain or Acquire. Take the lock when it is
-- free (or already the caller's), else join its wait queue, from which the
-- holder's release hands the lock straight to the first live waiter
-- (release.lua); a waiter that does not queue (ARGV[3] = '') only marks the
-- lock, so that the release that deletes it wakes such waiters. (grant.lua is
-- prepended.)
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's wait queue: a sorted set of entries by arrival (server
--          clock in microseconds, kept increasing); same cluster slot as KEYS[1]
-- KEYS[3]  the lock's fence counter key
-- ARGV[1]  the caller's owner id (must not contain ':' or ' ')
-- ARGV[2]  the lease ttl in milliseconds
-- ARGV[3]  the caller's queue entry, "owner ttl kind ticket channel" (the
--          grammar is in internal/lease/handoff.go; release.lua parses it),
--          or '' for a waiter that does not queue
-- ARGV[4]  the lock's kind as the caller runs it, as in the entry (see grant
--          in grant.lua)
-- ARGV[5]  the entry's place when an earlier attempt of the caller queued it
--          (the place of that attempt's reply), else ''
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
-- call queued it, or '' when the entry was queued already (by ARGV[5], or by
-- an attempt whose reply was lost). An entry queued by an earlier attempt
-- that the queue has lost (a restart, a failover, a release that found its
-- waiter's channel without a subscriber) goes back at its place, ahead of
-- the entries that came after it.
local held = redis.call('GET', KEYS[1])
if not held then
  -- Marked as queued for: other waiters may be queued behind this one.
  local value, bad = grant(KEYS[1], KEYS[3], ARGV[1], ARGV[2], ARGV[4], nil, true, true)
  if not value then
    return redis.error_reply(bad)
  end
  if ARGV[3] ~= '' then
    redis.call('ZREM', KEYS[2], ARGV[3])
  end
  return {1, value}
end
-- A value ending with '*' says waiters have waited for the grant it holds
-- (see internal/lease/handoff.go): its holder's release must look at the
-- queue, and wake waiters that do not queue when it deletes the lock. This
-- call marks it so when it finds it held by another owner.
local marked = string.byte(held, -1) == 42
if marked then
  held = string.sub(held, 1, -2)
end
local mine = held == ARGV[1]
if ARGV[4] ~= 'e' then
  mine = string.sub(held, 1, #ARGV[1] + 1) == ARGV[1] .. ':'
end
if mine then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if ARGV[3] ~= '' then
    redis.call('ZREM', KEYS[2], ARGV[3])
  end
  return {2, held}
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl == 0 then
  ttl = 1
end
if not marked then
  redis.call('SET', KEYS[1], held .. '*', 'KEEPTTL')
end
if ARGV[3] == '' then
  -- A waiter that does not queue: the mark is all it needs, so that the
  -- release that deletes the lock publishes its wake-up.
  return {0, ttl, ''}
end
-- The queue lives for the holder's remaining ttl and ten seconds more, and
-- each waiter's later attempts (by the time the holder's ttl runs out, and at
-- least every second) extend it, so it outlives every live waiter; the
-- release need not extend it, and a queue left behind by waiters that
-- vanished expires on its own. A holder without an expiry keeps the queue
-- without one.
local place, expire = '', ttl + 10000
if ARGV[5] ~= '' then
  -- Queued by an earlier attempt: kept at its place, or put back there.
  redis.call('ZADD', KEYS[2], 'NX', ARGV[5], ARGV[3])
else
  -- The place is the server clock (padded by hand, as in grant), or just
  -- after the last entry when the clock has not moved past it (a coarse or
  -- frozen clock, as in tests), so that arrival order holds whatever the
  -- clock does. The last entry's score is an integer below 2^53, which
  -- Redis prints in full: it is compared as a decimal string.
  local now = redis.call('TIME')
  place = now[1] .. string.rep('0', 6 - #now[2]) .. now[2]
  local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
  if last[2] and (#last[2] > #place or #last[2] == #place and last[2] >= place) then
    place = string.format('%d', tonumber(last[2]) + 1)
  end
  if redis.call('ZADD', KEYS[2], 'NX', place, ARGV[3]) == 0 then
    place = ''
  end
  if last[1] then
    -- The queue's expiry is its waiters' to extend: this waiter's next
    -- attempt passes its place and comes to the check below, and until
    -- then the entries before it keep the queue (one left by waiters that
    -- all vanished may expire first: this waiter then goes back at its
    -- place on that attempt).
    return {0, ttl, place}
  end
  -- A new queue, without an expiry yet.
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[2], expire)
  end
  return {0, ttl, place}
end
if ttl < 0 then
  redis.call('PERSIST', KEYS[2])
elseif redis.call('PTTL', KEYS[2]) < expire then
  -- The queue holds the entry here, so its ttl is -1 (no expiry) or more.
  redis.call('PEXPIRE', KEYS[2], expire)
end
return {0, ttl, place}
