-- semaphore: the functions of a semaphore's scripts, prepended (scripts.go)
-- after prelude.lua and queue.lua to each of them. Every one has the same KEYS:
--
-- KEYS[1]  the permits: a sorted set of owner ids, each scored by its
--          permit's expiry (the server clock in ms); an expired one counts
--          for nothing, and the next release or waiter drops it. Beside
--          them, the header: the one member scored below 0, which says what
--          limit the live permits were granted under and when the key
--          expires (scripts/wire.go). One key holds both, so that
--          no permit can outlive the limit it was granted under.
-- KEYS[2]  the wait queue (entries as in scripts/wire.go)
--
-- The owner id and the ttl of the caller are ARGV[1] and ARGV[2] of every
-- script that grants.

-- open(sharded) reads the clock and the header, and returns the
-- semaphore's state: now (the TIME reply), ms (the clock in ms), the scan
-- of the queue and the command that publishes grants (queue.lua's
-- scanning; sharded: '1'); empty, when the set holds nothing; and from
-- the header, member (its name), limit (as text), marked, and expiry (0 and
-- nil without a header).
local function open(sharded)
  local s = {expiry = 0}
  s.ms, s.now = clock()
  s.scan, s.publish = scanning(sharded)
  local h = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  s.empty = not h[1]
  if h[2] and tonumber(h[2]) < 0 then
    s.member, s.expiry = h[1], -tonumber(h[2])
    s.marked = string.byte(h[1], -1) == 42
    s.limit = string.sub(h[1], 2, s.marked and -2 or -1)
  end
  return s
end

-- prune drops the expired permits (the header, scored below 0, stays):
-- the server's clock may step back, and an expired permit left in the set
-- would count again.
local function prune(s)
  redis.call('ZREMRANGEBYSCORE', KEYS[1], 0, string.format('%d', s.ms))
end

-- mark rewrites the header with the given mark (true: a waiter that does
-- not queue has waited) and expiry.
local function mark(s, marked, expiry)
  local member = '#' .. s.limit .. (marked and '*' or '')
  if s.member and s.member ~= member then
    redis.call('ZREM', KEYS[1], s.member)
  end
  redis.call('ZADD', KEYS[1], string.format('%d', -expiry), member)
  s.member, s.marked, s.expiry = member, marked, expiry
end

-- enter(limit, sharded) is open for an acquire with limit: it drops the
-- expired permits and counts the live ones (an empty set, the uncontended
-- case, without asking), and returns nil and the error text 'LIMIT n' when
-- they were granted under another limit n. With none live, limit is the
-- semaphore's.
local function enter(limit, sharded)
  local s = open(sharded)
  s.count = 0
  if not s.empty then
    prune(s)
    s.count = redis.call('ZCOUNT', KEYS[1], '(' .. string.format('%d', s.ms), '+inf')
  end
  if s.count == 0 then
    s.limit, s.expiry = limit, 0
  elseif s.limit and s.limit ~= limit then
    return nil, 'LIMIT ' .. s.limit
  end
  s.limit = s.limit or limit
  return s
end

-- admit grants owner a permit for ttl ms (a string of digits), or restarts
-- the one it holds. The key expires a ttl after the permit that expires
-- last, so that it is kept alive once per ttl, and the header says when.
local function admit(s, owner, ttl)
  local expiry = s.ms + tonumber(ttl)
  redis.call('ZADD', KEYS[1], string.format('%d', expiry), owner)
  if expiry <= s.expiry then
    return
  end
  mark(s, s.marked, math.max(s.expiry, expiry + tonumber(ttl)))
  redis.call('PEXPIRE', KEYS[1], string.format('%d', s.expiry - s.ms))
end

-- renew restarts the caller's permit and reports true, if it holds a live
-- one; an expired one it drops.
local function renew(s)
  local expiry = redis.call('ZSCORE', KEYS[1], ARGV[1])
  if not expiry then
    return false
  elseif tonumber(expiry) <= s.ms then
    redis.call('ZREM', KEYS[1], ARGV[1]) -- expired: never to count again
    return false
  end
  admit(s, ARGV[1], ARGV[2])
  return true
end

-- serve grants the free permits to the queue's waiters in order, and
-- announces each grant. The caller's own entry (mine1 or mine2) is served
-- in its turn, and with take the caller also takes a permit left free once
-- the queue is empty. It stops with s.scan.more set while dead entries are
-- still ahead (queue.lua's next_waiter). It returns whether the caller got
-- a permit, and how many waiters were handed one.
local function serve(s, mine1, mine2, take)
  local limit, self, handed = tonumber(s.limit) or 0, false, 0
  while s.count < limit do
    local w = next_waiter(KEYS[2], s.now, s.scan, mine1, mine2)
    if not w then
      break
    end
    if w.mine then
      admit(s, ARGV[1], ARGV[2])
      self = true
    else
      admit(s, w.owner, w.ttl)
      announce(s.publish, w, '-', s.now, s.limit)
      handed = handed + 1
    end
    s.count = s.count + 1
  end
  if take and not self and not s.scan.more and s.count < limit then
    admit(s, ARGV[1], ARGV[2])
    s.count, self = s.count + 1, true
  end
  return self, handed
end

-- first is the ms until the first live permit expires, at least 1, once
-- the expired ones are pruned (the header, if any, comes before it).
local function first(s)
  local at = s.member and 1 or 0
  local head = redis.call('ZRANGE', KEYS[1], at, at, 'WITHSCORES')
  return math.max(tonumber(head[2] or s.ms + 1) - s.ms, 1)
end

