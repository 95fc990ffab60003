-- grant: the functions shared by every script that grants a lock
-- (fenced_acquire, wait, release). scripts.go prepends this file to each of
-- them, so a token is drawn by one piece of code wherever a grant happens.
--
-- Redis runs a script's whole chunk on every call, and each function defined
-- in it is a closure built anew each time. So the shared functions are built
-- by grantlib, which a script calls only on a path that uses them: a release
-- of a lock nobody waits for builds none of them.
--
-- Tokens never pass through tostring(): Lua numbers are doubles and print with
-- %.14g, which would round a 16-digit token. They stay decimal strings, compared
-- by length and then by text.

-- grantlib returns grant and micros, described below.
local function grantlib()
  -- micros is the server clock in microseconds, as a decimal string, from
  -- time (a TIME reply) or, when time is nil, a new reading. It pads by hand:
  -- string.format and tonumber cost a release several microseconds when
  -- Redis wakes from idle, as it does for every handoff.
  local function micros(time)
    time = time or redis.call('TIME')
    return time[1] .. string.rep('0', 6 - #time[2]) .. time[2]
  end

  -- fault says what is wrong with current, the value of the fence counter
  -- key counter, or returns nil when a token can be drawn from it: decimal
  -- digits without a leading zero, below 2^63 - 1 so that INCR can count on.
  -- current is a GET's reply, or the error table of one that met a key of
  -- another type.
  local function fault(counter, current)
    local what
    if type(current) == 'table' then
      what = 'holds a key of another type (' .. tostring(current.err) .. ')'
    elseif #current == 0 or #current > 19 or string.find(current, '[^0-9]') or
        #current > 1 and string.byte(current, 1) == 48 then
      what = 'holds "' .. string.sub(current, 1, 40) .. '", not a fencing token (decimal digits below 2^63-1)'
    elseif #current == 19 and current >= '9223372036854775807' then
      what = 'holds ' .. current .. ', the largest token there is: no larger one can be drawn'
    else
      return nil
    end
    return 'BADFENCE fence counter ' .. counter .. ' ' .. what .. '; repair or delete it'
  end

  -- grant stores owner's grant in the lock key for ttl milliseconds and
  -- returns the value stored and, for a correctness lock, the grant's token;
  -- or nil and an error reply (starting BADFENCE, which internal/lease reads)
  -- when the fence counter holds no token, and then nothing is changed. kind
  -- is the lock's kind as its owner's Locker runs it: 'e' for an efficiency
  -- lock (the value is the owner id), 'f' for a correctness lock, 'c' for a
  -- correctness lock with the clock floor, 't' for one with the clock floor
  -- whose counter expires with the lease. The token is max(counter + 1,
  -- server clock in microseconds) with the clock floor, counter + 1 without,
  -- and is stored back into the counter key; the value is "owner:token".
  -- time is a TIME reply the caller read already, for the clock floor, or nil.
  local function grant(lock, counter, owner, ttl, kind, time)
    if kind == 'e' then
      redis.call('SET', lock, owner, 'PX', ttl)
      return owner
    end
    local token, current
    if kind == 'f' then
      current = redis.pcall('GET', counter)
    else
      -- Store the clock and read the counter it replaces in one call (a
      -- counter of another type fails, untouched). Nearly always the clock
      -- is ahead; when it is not, the counter is put back below and counted
      -- on from.
      token = micros(time)
      if kind == 't' then
        current = redis.pcall('SET', counter, token, 'PX', ttl, 'GET')
      else
        current = redis.pcall('SET', counter, token, 'GET')
      end
    end
    local bad = current and fault(counter, current)
    if bad then
      if token and type(current) == 'string' then
        redis.call('SET', counter, current)
      end
      return nil, bad
    end
    -- token > current, as decimal strings of digits.
    if token and current and (#token < #current or #token == #current and token <= current) then
      if kind == 't' then
        redis.call('SET', counter, current, 'PX', ttl)
      else
        redis.call('SET', counter, current)
      end
      token = nil
    end
    if not token then
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
    redis.call('SET', lock, value, 'PX', ttl)
    return value, token
  end

  return grant, micros
end
