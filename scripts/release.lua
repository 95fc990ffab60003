-- release: end the caller's grant, handing the lock to the first live waiter
-- in its queue, or deleting it and waking the waiters that do not queue. A
-- lock whose lease lapsed (its holder died or froze, with waiters queued) is
-- served the same way, whoever calls. (What it calls of prelude.lua comes
-- first; of grant.lua and queue.lua, on the branch that hands the lock on.)
-- The value with its mark, the queue entry and the grant message are
-- specified in scripts/wire.go; docs/waiting.md tells the strategy.
--
-- A release that ends a grant it names exactly (a holder's, or an
-- operator's break) leaves a mark of what it did, for ARGV[6] ms: a resend
-- of the same call (go-redis resends a command whose reply was lost) finds
-- the grant gone or handed on, and replies what the first send did, from
-- the mark, changing nothing but the mark's expiry. The grant's mark
-- (KEYS[4]) is "r" for a holder's release, "b" for a break, which its
-- holder's release reads. A break also marks its own call (KEYS[5]): "b" it
-- broke the grant, "x" it found nothing to break; a resend of that call
-- finds its mark before anything else and does nothing, even if the lock
-- holds a grant of the same value again (an efficiency waiter's next grant
-- is its owner id again) or that grant's mark has changed since.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's wait queue
-- KEYS[3]  the lock's fence counter key
-- KEYS[4]  the mark of the grant ARGV[1] (internal/lease's EndedKey),
--          optional: without it no mark is read or written
-- KEYS[5]  with ARGV[2] = '2', the mark of the break call (EndedKey of
--          "break " and a nonce of the call's), optional
-- KEYS[6]  with KEYS[5], an election's leader key, optional: the broken
--          holder's term is cleared from it, and its observers told
-- ARGV[1]  the value the caller's grant stored; with ARGV[2] = '1', its
--          "owner:" prefix (a prefix not ending in ':' matches nothing)
-- ARGV[2]  '1' to match ARGV[1] as a prefix, '2' to break the grant
--          ARGV[1] (an operator's break: exactly that grant, whoever
--          holds it), else '0': the holder's release, exactly
-- ARGV[3]  a queue entry to remove first (a waiter giving up), or ''
-- ARGV[4]  '1' when grant channels are sharded (Redis Cluster), else '0'
-- ARGV[5]  another entry to remove with ARGV[3] (its next one), optional
-- ARGV[6]  how long the marks last, in ms: optional, with KEYS[4] only
--
-- Reply, a string: the code, and, when this call handed the lock on to the
-- first live waiter, a space and the token of that grant ('-' for an
-- efficiency grant). The codes:
--   1          the lock was deleted (or an earlier send of this call ended
--              the grant)
--   2 token    it was handed to a waiter
--   0          the caller's lease is gone (the key is, or the lease
--              lapsed); with a token, the lease had lapsed and this call
--              handed the lock on
--   -1         another owner holds it (nothing changed)
--   -3         an operator broke the caller's lease (nothing changed)
--   3          released, with dead entries still ahead of the first live
--              waiter: the lock is left vacant, and the caller calls again
--              (with ARGV[1] '') to go on
--   -2         gone, with dead entries ahead: likewise
local breaking = ARGV[2] == '2'

-- ended(code) is the reply of a holder's release that found no grant of
-- the caller's to end, which would reply code: what an earlier send of the
-- same call did, from the mark (the grant ended: 1, or 3 when the queue
-- still needs serving on, for -2), or -3 for a holder whose grant an
-- operator broke; else code. A break's reply is code.
local function ended(code)
  local did = not breaking and KEYS[4] and redis.call('GET', KEYS[4])
  if not did then
    return code
  end
  redis.call('PEXPIRE', KEYS[4], ARGV[6])
  if did == 'r' then
    return code == -2 and 3 or 1
  elseif did == 'b' and (code == 0 or code == -1) then
    return -3
  end
  return code
end

if breaking and KEYS[5] then
  local did = redis.call('GET', KEYS[5])
  if did then
    -- This break ran already: reply what it did, and do nothing more.
    redis.call('PEXPIRE', KEYS[5], ARGV[6])
    return did == 'b' and '1' or '-1'
  end
  -- Nothing broken yet: so says the mark, for a resend, until below.
  redis.call('SET', KEYS[5], 'x', 'PX', ARGV[6])
end

if ARGV[3] ~= '' then
  local next = ARGV[5] or ''
  redis.call('ZREM', KEYS[2], ARGV[3], next ~= '' and next or ARGV[3])
end
local held = redis.call('GET', KEYS[1])
if not held then
  return ended(0) .. ''
end
local marked, left, now
held, marked, left, now = read_value(held)
local gone = left == 0
if gone then
  -- The lease lapsed: nobody's to release, and the queue is served below.
elseif ARGV[2] == '1' then
  if #ARGV[1] < 2 or string.sub(ARGV[1], -1) ~= ':' or string.sub(held, 1, #ARGV[1]) ~= ARGV[1] then
    return '-1'
  end
elseif held ~= ARGV[1] then
  return ended(-1) .. ''
elseif breaking then
  local colon = KEYS[6] and string.find(held, ':', 1, true)
  if colon and redis.call('HGET', KEYS[6], 'grant') == held then
    redis.call('DEL', KEYS[6])
    redis.call('PUBLISH', KEYS[6], 'vacant ' .. string.sub(held, colon + 1))
  end
  if KEYS[5] then
    redis.call('SET', KEYS[5], 'b', 'PX', ARGV[6])
  end
end
if KEYS[4] and not gone then
  redis.call('SET', KEYS[4], breaking and 'b' or 'r', 'PX', ARGV[6])
end
if marked then
  -- Only here does a release hand the lock on: the functions that do it
  -- are built on this branch alone (scripts.go).
  -- (shared functions)
  local scan, publish = scanning(ARGV[4])
  local w
  w, now = next_waiter(KEYS[2], now, scan)
  local value, token
  if w then
    value, token = grant(w.owner, w.ttl, w.kind, now)
  end
  if value then
    announce(publish, w, token or '-', now)
    if gone then
      if ended(0) == 1 then
        return '1' -- an earlier send ended the caller's grant
      end
      return '0 ' .. (token or '-')
    end
    return '2 ' .. (token or '-')
  elseif scan.more then
    -- Dead entries left ahead: nobody takes the lock until they are gone
    -- (the vacant value, wire.go).
    redis.call('SET', KEYS[1], '*0', 'PX', LINGER)
    return (gone and ended(-2) or 3) .. ''
  elseif w then
    -- A counter that holds no token: the waiter gets its bare ticket (no
    -- grant) and meets the error itself; the lock is deleted below.
    redis.call('ZADD', KEYS[2], w.place, w.entry)
    redis.call('PEXPIRE', KEYS[2], LINGER)
    redis.call(publish, w.channel, w.ticket)
  end
end
redis.call('DEL', KEYS[1])
if marked then
  redis.call('PUBLISH', KEYS[1] .. ':wake', '')
end
if gone then
  return ended(0) .. ''
end
return '1'
