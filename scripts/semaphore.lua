-- semaphore: the functions of a semaphore's scripts, prepended (scripts.go)
-- after queue.lua to each of them. Every one has the same KEYS:
--
-- KEYS[1]  the permits: a sorted set of owner ids, each scored by its
--          permit's expiry (the server clock in ms); an expired one counts
--          for nothing, and the next release or waiter drops it
-- KEYS[2]  the wait queue (entries as in internal/lease/handoff.go)
-- KEYS[3]  the header: the limit the live permits were granted under, and
--          when it and the permits expire (internal/lease/handoff.go); one
--          left when no permit is live any more means nothing
--
-- The owner id and the ttl of the caller are ARGV[1] and ARGV[2] of every
-- script that grants.

-- open(sharded) reads the clock and returns the semaphore's state: now (the
-- TIME reply), ms (the clock in ms), and the scan of the queue and the
-- command that publishes grants (queue.lua's scanning; sharded: '1').
local function open(sharded)
  local s = {now = redis.call('TIME'), expiry = 0}
  s.scan, s.publish = scanning(sharded)
  s.ms = tonumber(s.now[1]) * 1000 + math.floor(tonumber(s.now[2]) / 1000)
  return s
end

-- header reads the header into s: limit (as text, nil without a header),
-- marked, and expiry. Without a header (deleted by hand) the expiry is the
-- last permit's, so that no grant or refresh cuts the permits key short.
local function header(s)
  local h = redis.call('GET', KEYS[3])
  local limit, expiry = string.match(h or '', '^(%d+%*?) (%d+)$')
  if limit then
    s.marked = string.byte(limit, -1) == 42
    s.limit = s.marked and string.sub(limit, 1, -2) or limit
    s.expiry = tonumber(expiry)
  else
    s.expiry = tonumber(redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2] or 0)
    s.rewrite = true
  end
end

-- enter(limit, sharded) is open for an acquire with limit: it counts the
-- live permits, and returns nil and the error text 'LIMIT n' when they were
-- granted under another limit n. With none live, limit is the semaphore's.
local function enter(limit, sharded)
  local s = open(sharded)
  header(s)
  s.count = redis.call('ZCOUNT', KEYS[1], '(' .. string.format('%d', s.ms), '+inf')
  if s.count == 0 then
    s.limit, s.marked, s.expiry = limit, false, 0
  elseif not s.limit then
    -- No header while permits are live: take the caller's limit.
    s.limit, s.marked = limit, false
  elseif s.limit ~= limit then
    return nil, 'LIMIT ' .. s.limit
  end
  return s
end

-- admit grants owner a permit for ttl ms (a string of digits), or restarts
-- the one it holds. The permits and the header expire a ttl after the
-- permit that expires last, so that they are kept alive once per ttl; and
-- with s.rewrite (no header, or a permits key that ZADD made anew) they are
-- written again at once.
local function admit(s, owner, ttl)
  local expiry = s.ms + tonumber(ttl)
  redis.call('ZADD', KEYS[1], string.format('%d', expiry), owner)
  if expiry <= s.expiry and not s.rewrite then
    return
  end
  s.expiry, s.rewrite = math.max(s.expiry, expiry + tonumber(ttl)), false
  local left = string.format('%d', s.expiry - s.ms)
  if s.limit then
    redis.call('SET', KEYS[3], s.limit .. (s.marked and '*' or '') .. ' ' .. string.format('%d', s.expiry), 'PX', left)
  end
  redis.call('PEXPIRE', KEYS[1], left)
end

-- renew restarts the caller's permit and reports true, if it holds a live
-- one.
local function renew(s)
  local expiry = redis.call('ZSCORE', KEYS[1], ARGV[1])
  if not expiry or tonumber(expiry) <= s.ms then
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

-- first is the ms until the first permit expires, at least 1, once the
-- expired ones are pruned.
local function first(s)
  local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return math.max(tonumber(head[2] or s.ms + 1) - s.ms, 1)
end

-- prune drops the expired permits.
local function prune(s)
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', s.ms))
end
