-- grant: the function shared by every script that grants a lock
-- (fenced_acquire, wait, release). scripts.go prepends this file to each of
-- them, so a token is drawn by one piece of code wherever a grant happens.
--
-- Redis runs a script's whole chunk on every call, and each function defined
-- in it is a closure built anew each time, for the garbage collector to clear
-- away. So this file defines one function, with what it needs (the clock in
-- microseconds, the check of the counter) written out in it: a call of any
-- script builds one closure, whatever its path.
--
-- Tokens never pass through tostring(): Lua numbers are doubles and print with
-- %.14g, which would round a 16-digit token. They stay decimal strings, compared
-- by length and then by text.

-- grant stores owner's grant in the lock key for ttl milliseconds and returns
-- the value stored and, for a correctness lock, the grant's token; or nil and
-- an error reply (starting BADFENCE, which internal/lease reads) when the
-- fence counter holds no token, and then nothing is changed. kind is the
-- lock's kind as its owner's Locker runs it: 'e' for an efficiency lock (the
-- value is the owner id), 'f' for a correctness lock, 'c' for a correctness
-- lock with the clock floor, 't' for one with the clock floor whose counter
-- expires with the lease. The token is max(counter + 1, server clock in
-- microseconds) with the clock floor, counter + 1 without, and is stored back
-- into the counter key; the value is "owner:token". now is a TIME reply the
-- caller read already, for the clock floor, or nil.
--
-- free says the caller found the lock key free in this call ('e' grants
-- need it). Without it, grant takes a correctness lock only if its key is
-- free, and otherwise changes nothing and returns false and the holder's
-- value. queued says waiters are queued for the lock: the key's value then
-- ends with '*' (the mark that release.lua reads; see
-- internal/lease/handoff.go), which the value returned leaves out.
local function grant(lock, counter, owner, ttl, kind, now, free, queued)
  local mark = queued and '*' or ''
  if kind == 'e' then
    redis.call('SET', lock, owner .. mark, 'PX', ttl)
    return owner
  end
  local token, current, taken
  if kind == 'f' then
    if not free then
      local holder = redis.call('GET', lock)
      if holder then
        return false, holder
      end
    end
    current = redis.pcall('GET', counter)
  else
    -- The clock in microseconds, padded by hand: string.format and tonumber
    -- cost a call microseconds of cold code when Redis wakes from idle, as
    -- it does for every handoff.
    now = now or redis.call('TIME')
    token = now[1] .. string.rep('0', 6 - #now[2]) .. now[2]
    if not free then
      -- Take the lock with the clock as its token, which nearly always
      -- wins, before the counter is touched: one command for what would
      -- be a GET and a SET, and a held lock is left as it was.
      local holder = redis.call('SET', lock, owner .. ':' .. token, 'NX', 'PX', ttl, 'GET')
      if holder then
        return false, holder
      end
      taken = true
    end
    -- Store the clock and read the counter it replaces in one call (a
    -- counter of another type fails, untouched). When the counter is
    -- ahead, it is put back below and counted on from.
    if kind == 't' then
      current = redis.pcall('SET', counter, token, 'PX', ttl, 'GET')
    else
      current = redis.pcall('SET', counter, token, 'GET')
    end
  end
  if current then
    -- A token is decimal digits without a leading zero, below 2^63 - 1 so
    -- that INCR can count on. current is a GET's reply, or the error table
    -- of one that met a key of another type.
    local bad
    if type(current) == 'table' then
      bad = 'holds a key of another type (' .. tostring(current.err) .. ')'
    elseif #current > 19 or current ~= '0' and not string.find(current, '^[1-9]%d*$') then
      bad = 'holds "' .. string.sub(current, 1, 40) .. '", not a fencing token (decimal digits below 2^63-1)'
    elseif #current == 19 and current >= '9223372036854775807' then
      bad = 'holds ' .. current .. ', the largest token there is: no larger one can be drawn'
    end
    if bad then
      if token and type(current) == 'string' then
        redis.call('SET', counter, current)
      end
      if taken then
        redis.call('DEL', lock)
      end
      return nil, 'BADFENCE fence counter ' .. counter .. ' ' .. bad .. '; repair or delete it'
    end
    -- token > current, as decimal strings of digits.
    if token and (#token < #current or #token == #current and token <= current) then
      if kind == 't' then
        redis.call('SET', counter, current, 'PX', ttl)
      else
        redis.call('SET', counter, current)
      end
      token = nil
    end
  end
  if token then
    if taken then
      return owner .. ':' .. token, token
    end
  else
    -- INCR's reply is a Lua number, exact below 2^53 and printed exactly
    -- by '%d'; above that, the string comes from Redis itself.
    local n = redis.call('INCR', counter)
    if n < 9007199254740992 then
      token = string.format('%d', n)
    else
      token = redis.call('GET', counter)
    end
  end
  local value = owner .. ':' .. token
  redis.call('SET', lock, value .. mark, 'PX', ttl)
  return value, token
end
