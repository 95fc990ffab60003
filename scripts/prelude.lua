-- prelude: what the scripts of a lock and of a semaphore share: the
-- server's clock, a lock's value, and the restart of its lease. A script
-- gets, before its own file, the functions of this file and of the other
-- shared files (grant, queue, semaphore, lease, register_fence) that it
-- calls, and those they call (scripts.go). LINGER, in the code, is written
-- as its number (prelude.go): how long in ms a lock's key whose value
-- carries the mark of waiters outlives its lease, and a queue the lease of
-- the holder it waits for (Linger in Go). The value and its mark are
-- specified in scripts/wire.go; the states they make, in docs/protocol.md,
-- and what a shared function costs a call, in its section "Cost".

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
