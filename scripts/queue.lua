-- queue: the functions that hand a grant to a queued waiter, prepended
-- (scripts.go, after prelude.lua) to every script that does: wait, release
-- and the semaphore's. The queue entry and the grant message are specified in
-- scripts/wire.go.
--
-- waiting(e, place, scan) parses the queue entry e, queued at place, and
-- returns its waiter as a table {owner, ttl, kind, ticket, channel, entry,
-- place} if it may still take a grant, else nil: an entry that does not
-- parse, or whose channel nobody is subscribed to (a PSUBSCRIBE does not
-- count; scan.numsub is 'NUMSUB' or 'SHARDNUMSUB', and scan keeps each
-- channel's count, asked once per script). The patience field is not
-- judged: the server's clock can step, and a step would spend it; a waiter
-- that gives up takes its entry out itself (internal/lease).
local function waiting(e, place, scan)
  -- entry = owner SP ttl SP kind SP patience SP ticket SP channel
  local a = string.find(e, ' ', 1, true)
  local b = a and string.find(e, ' ', a + 1, true)
  local c = b and string.find(e, ' ', b + 1, true)
  local d = c and string.find(e, ' ', c + 1, true)
  local f = d and string.find(e, ' ', d + 1, true)
  local kind = f and string.sub(e, b + 1, c - 1)
  local ttl = f and string.sub(e, a + 1, b - 1) or ''
  local patience = f and tonumber(string.sub(e, c + 1, d - 1))
  local valid = f and a > 1 and f > d + 1 and f < #e and patience and patience >= 0 and
      #ttl > 0 and #ttl < 16 and (kind == 'e' or kind == 'f' or kind == 'c' or kind == 't')
  -- PX refuses 0: a ttl is digits without a leading zero.
  for j = 1, valid and #ttl or 0 do
    local digit = string.byte(ttl, j)
    valid = valid and digit >= (j == 1 and 49 or 48) and digit <= 57
  end
  if not valid then
    return nil
  end
  local channel = string.sub(e, f + 1)
  local subscribers = scan[channel]
  if not subscribers then
    subscribers = redis.call('PUBSUB', scan.numsub, channel)[2]
    scan[channel] = subscribers
  end
  if subscribers == 0 then
    return nil
  end
  return {owner = string.sub(e, 1, a - 1), ttl = ttl, kind = kind, ticket = string.sub(e, d + 1, f - 1),
    channel = channel, entry = e, place = place}
end

-- next_waiter(queue, now, scan, mine1, mine2) takes entries off the head of
-- queue until one whose waiter may still take a grant, and returns it as a
-- table (see waiting), or nil; and the TIME reply now, read at the first
-- entry when not given. An entry whose waiter cannot take a grant (waiting)
-- is dropped. An entry equal to mine1 or mine2, the caller's own, is
-- returned as {entry, place, mine = true}. scan is what the calls of one
-- script share: numsub ('NUMSUB' or 'SHARDNUMSUB'), the subscriber counts of
-- the channels seen, and left, how many more entries the script may look
-- at: it returns nil
-- with scan.more set once that runs out with entries left, so that no call
-- runs long however many dead entries a killed process left (the caller
-- says so in its reply, and the next call goes on).
local function next_waiter(queue, now, scan, mine1, mine2)
  local n = 1 -- the head is nearly always live: pop it alone first
  while scan.left > 0 do
    local popped = redis.call('ZPOPMIN', queue, math.min(n, scan.left))
    if #popped == 0 then
      return nil, now
    end
    -- One reading before any grant: Redis 7.2+ counts a PX set in a script
    -- from the script's start.
    now = now or redis.call('TIME')
    for i = 1, #popped, 2 do
      scan.left = scan.left - 1
      local e, w = popped[i], nil
      if e ~= '' and (e == mine1 or e == mine2) then
        w = {entry = e, place = popped[i + 1], mine = true}
      else
        w = waiting(e, popped[i + 1], scan)
      end
      if w then
        if i + 1 < #popped then
          -- Put back what was popped after it, at the same places.
          local back = {}
          for j = #popped, i + 2, -2 do
            back[#back + 1] = popped[j]
            back[#back + 1] = popped[j - 1]
          end
          redis.call('ZADD', queue, unpack(back))
        end
        return w, now
      end
    end
    n = 64
  end
  scan.more = redis.call('ZCARD', queue) > 0
  return nil, now
end

-- scanning(sharded) is the scan of a script's next_waiter calls (see
-- there), on grant channels sharded ('1') or not; with it, the command that
-- publishes a grant: 'PUBLISH' or 'SPUBLISH'.
local function scanning(sharded)
  if sharded == '1' then
    return {numsub = 'SHARDNUMSUB', left = 100}, 'SPUBLISH'
  end
  return {numsub = 'NUMSUB', left = 100}, 'PUBLISH'
end

-- announce(publish, w, token, now, limit) publishes the grant message for
-- waiter w (from next_waiter) with token ('-' for an efficiency grant), made
-- at now, and for a semaphore's permit the limit it was granted under;
-- publish is 'PUBLISH' or 'SPUBLISH'.
local function announce(publish, w, token, now, limit)
  local msg = w.ticket .. ' ' .. token .. ' ' .. now[1] .. ' ' .. now[2]
  redis.call(publish, w.channel, limit and msg .. ' ' .. limit or msg)
end

-- enqueue(queue, now, entry, place, prev) keeps the caller's place in queue,
-- given the TIME reply now: its previous entry prev, still queued at place,
-- stays (code 0); else entry is queued (code 3) at place, or, with none, at
-- the clock in µs, or just after the last entry when the clock has not moved
-- past it (arrival order). It returns the code, the entry's place and the
-- clock in µs, as decimal strings: scores below 2^53 print in full, and are
-- compared as text.
local function enqueue(queue, now, entry, place, prev)
  local us = now[1] .. string.rep('0', 6 - #now[2]) .. now[2]
  if place ~= '' and redis.call('ZSCORE', queue, prev) then
    return 0, place, us
  end
  if place == '' then
    place = us
    local last = redis.call('ZRANGE', queue, -1, -1, 'WITHSCORES')
    if last[2] and (#last[2] > #place or #last[2] == #place and last[2] >= place) then
      place = string.format('%d', tonumber(last[2]) + 1)
    end
  end
  if redis.call('ZADD', queue, 'NX', place, entry) == 0 then
    place = redis.call('ZSCORE', queue, entry) -- queued by an earlier send of this call
  end
  return 3, place, us
end
