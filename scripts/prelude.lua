-- prelude: what the scripts of a lock and of a semaphore say once, prepended
-- (scripts.go) before every other file of each: the server's clock, a lock's
-- value, and the restart of its lease. The line before this one, written by
-- prelude.go, is LINGER: how long in ms a lock's key whose value carries the
-- mark of waiters outlives its lease, and a queue the lease of the holder it
-- waits for (Linger in Go). The value and its mark are specified in
-- internal/lease/handoff.go; the states they make, in docs/protocol.md.
--
-- Redis builds every function of a script anew on each call, so a shared
-- function costs each script it is prepended to, used or not. Measured
-- (redis-server 7.0.15, redis-benchmark -c 1 of EVALSHA, INFO commandstats):
-- an empty script 1.0-1.2 µs a call; with grant.lua and queue.lua before
-- it 1.3-1.4 µs, with queue.lua and semaphore.lua 1.9 µs; this prelude's
-- three functions add 0.1-0.3 µs (release.lua on a missing key: 3.9-4.1
-- µs without, 4.1-4.2 with). The rule: a prepended function stays while it
-- costs well under a tenth of the cheapest use of the scripts it rides on.
-- grant.lua and queue.lua add 0.25 µs to an uncontended efficiency SET +
-- release of 5.2 µs (redsync's: 5.6 µs, same bench run); semaphore.lua's
-- 0.8 µs ride on permits that cost 186-323 µs of server time per contended
-- acquisition (bench semaphore scenario). So the prelude holds only these
-- three, and none calls Redis but to read the clock, once, and to restart a
-- lease.

-- clock(now) is the server clock in ms, and the TIME reply it was read from:
-- now if given, else read here.
local function clock(now)
  now = now or redis.call('TIME')
  return tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000), now
end

-- read_value(held, now) reads a lock's value held, as GET returns it (not
-- nil): the grant (the value without the mark of waiters), whether it carries
-- the mark, and the ms left of the lease the mark records: at least 1, or 0
-- when the lease has lapsed (its expiry is not after the clock); nil when
-- the value records none. Only then is the clock read, and its TIME reply
-- comes last (now, when given, is the one to use).
local function read_value(held, now)
  local star = string.find(held, '*', 1, true)
  if not star then
    return held, false
  end
  local expiry = tonumber(string.sub(held, star + 1))
  held = string.sub(held, 1, star - 1)
  if not expiry then
    return held, true -- marked without expiry: a key set by hand
  end
  local ms
  ms, now = clock(now)
  if expiry <= ms then
    return held, true, 0, now
  end
  return held, true, math.max(expiry - ms, 1), now
end

-- restart(grant, ttl, now) restarts the lease of the lock KEYS[1], which
-- holds grant, for ttl ms. Given now, a TIME reply, the value carries the
-- mark of waiters: it records the lease's new expiry, and the key outlives
-- it by LINGER. Without, the key's ttl is the lease's (a mark without expiry
-- stays).
local function restart(grant, ttl, now)
  if now then
    local expiry = clock(now) + ttl
    redis.call('SET', KEYS[1], grant .. '*' .. string.format('%d', expiry), 'PX', ttl + LINGER)
  else
    redis.call('PEXPIRE', KEYS[1], ttl)
  end
end
