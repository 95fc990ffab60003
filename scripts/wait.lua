-- wait: one attempt of a waiting acquire: take the lock if it is free (or
-- the caller's already), else queue the caller, or only mark the lock for a
-- waiter that does not queue. (grant.lua and queue.lua are prepended.) The
-- queue entry and the mark are specified in internal/lease/handoff.go.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's wait queue (a sorted set of entries by place)
-- KEYS[3]  the lock's fence counter key
-- ARGV[1]  the caller's owner id
-- ARGV[2]  the lease ttl in milliseconds
-- ARGV[3]  the lock's kind (see grant.lua)
-- ARGV[4]  the entry to queue, or '' for a waiter that does not queue
-- ARGV[5]  the place of the caller's previous entry, or '' if it has none
-- ARGV[6]  that previous entry, or ''
--
-- Reply when the lock is the caller's: {1, value} for a grant made by this
-- call, {2, value} for one it had already (its ttl restarted), value without
-- the mark; the caller's entries leave the queue. A counter that holds no
-- token: an error reply starting BADFENCE.
-- Otherwise {code, ttl, place, now}: ttl the holder's remaining ms (-1: no
-- expiry), now the server clock in µs; code 3 when this call queued ARGV[4]
-- (at ARGV[5] if given: the previous entry was gone), 0 when the previous
-- entry is still queued (it stays), or the caller does not queue (place '').
local held = redis.call('GET', KEYS[1])
if not held then
  local value, bad = grant(KEYS[1], KEYS[3], ARGV[1], ARGV[2], ARGV[3], nil, true, true)
  if not value then
    return redis.error_reply(bad)
  end
  redis.call('ZREM', KEYS[2], ARGV[4], ARGV[6])
  return {1, value}
end
local marked = string.byte(held, -1) == 42
if marked then
  held = string.sub(held, 1, -2)
end
local mine = held == ARGV[1]
if ARGV[3] ~= 'e' then
  mine = string.sub(held, 1, #ARGV[1] + 1) == ARGV[1] .. ':'
end
if mine then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('ZREM', KEYS[2], ARGV[4], ARGV[6])
  return {2, held}
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl == 0 then
  ttl = 1
end
if not marked then
  redis.call('SET', KEYS[1], held .. '*', 'KEEPTTL')
end
if ARGV[4] == '' then
  return {0, ttl, '', ''}
end
local code, place, now = enqueue(KEYS[2], redis.call('TIME'), ARGV[4], ARGV[5], ARGV[6])
-- The queue outlives the holder by 10 s; every attempt of a waiter extends it.
if ttl < 0 then
  redis.call('PERSIST', KEYS[2])
elseif redis.call('PTTL', KEYS[2]) < ttl + 10000 then
  redis.call('PEXPIRE', KEYS[2], ttl + 10000)
end
return {code, ttl, place, now}
