-- semaphore: the functions of a semaphore's scripts, prepended (scripts.go)
-- after queue.lua to each of them. Every one has the same KEYS:
--
-- KEYS[1]  the permits: a sorted set of owner ids, each scored by its
--          permit's expiry (the server clock in ms); every script drops the
--          expired ones first
-- KEYS[2]  the wait queue (entries as in internal/lease/handoff.go)
-- KEYS[3]  the limit the live permits were granted under, in decimal, with
--          a trailing '*' once a waiter that does not queue has waited (its
--          releases then publish a wake-up on KEYS[1] .. ':wake')
--
-- The permits and the limit expire with the permit that expires last. The
-- owner id and the ttl of the caller are ARGV[1] and ARGV[2] of every script
-- that grants.

-- open(sharded) reads the clock and drops the expired permits. It returns
-- the semaphore's state: now (the TIME reply), ms (the clock in ms), count
-- (the live permits), limit (their limit as text, nil when none is live),
-- marked, and the pub/sub commands of the grant channels (sharded: '1').
local function open(sharded)
  local s = {now = redis.call('TIME'), numsub = 'NUMSUB', publish = 'PUBLISH'}
  if sharded == '1' then
    s.numsub, s.publish = 'SHARDNUMSUB', 'SPUBLISH'
  end
  s.ms = tonumber(s.now[1]) * 1000 + math.floor(tonumber(s.now[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', s.ms))
  s.count = redis.call('ZCARD', KEYS[1])
  s.limit = redis.call('GET', KEYS[3])
  if s.count == 0 and s.limit then
    redis.call('DEL', KEYS[3])
    s.limit = nil
  end
  s.marked = s.limit and string.byte(s.limit, -1) == 42
  if s.marked then
    s.limit = string.sub(s.limit, 1, -2)
  end
  return s
end

-- enter(limit, sharded) is open for an acquire with limit: it returns nil
-- and the error text 'LIMIT n' when the live permits were granted under
-- another limit n, and records limit when none is live.
local function enter(limit, sharded)
  local s = open(sharded)
  if s.limit and s.limit ~= limit then
    return nil, 'LIMIT ' .. s.limit
  elseif not s.limit then
    redis.call('SET', KEYS[3], limit)
    s.limit = limit
  end
  return s
end

-- keep sets the expiry of the permits and the limit to that of the permit
-- that expires last.
local function keep(s)
  local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  if last[2] then
    local left = string.format('%d', tonumber(last[2]) - s.ms)
    redis.call('PEXPIRE', KEYS[1], left)
    redis.call('PEXPIRE', KEYS[3], left)
  end
end

-- admit grants owner a permit for ttl ms (a string of digits), or restarts
-- the one it holds.
local function admit(s, owner, ttl)
  redis.call('ZADD', KEYS[1], string.format('%d', s.ms + tonumber(ttl)), owner)
end

-- renew restarts the caller's permit and reports true, if it holds one.
local function renew(s)
  if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
    return false
  end
  admit(s, ARGV[1], ARGV[2])
  keep(s)
  return true
end

-- serve grants the free permits to the queue's waiters in order, and
-- announces each grant. The caller's own entry (mine1 or mine2) is served
-- in its turn, and with take the caller also takes a permit left free once
-- the queue is empty. It returns whether the caller got a permit, and how
-- many waiters were handed one.
local function serve(s, mine1, mine2, take)
  local limit, self, handed = tonumber(s.limit) or 0, false, 0
  while s.count < limit do
    local w = next_waiter(KEYS[2], s.now, s.numsub, mine1, mine2)
    if not w then
      break
    end
    if w.mine then
      admit(s, ARGV[1], ARGV[2])
      self = true
    else
      admit(s, w.owner, w.ttl)
      announce(s.publish, w, '-', s.now)
      handed = handed + 1
    end
    s.count = s.count + 1
  end
  if take and not self and s.count < limit then
    admit(s, ARGV[1], ARGV[2])
    s.count, self = s.count + 1, true
  end
  if self or handed > 0 then
    keep(s)
  end
  return self, handed
end

-- first is the ms until the first live permit expires (at least 1).
local function first(s)
  local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return math.max(tonumber(head[2] or s.ms + 1) - s.ms, 1)
end
