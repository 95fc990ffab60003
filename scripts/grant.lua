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

  -- grant stores owner's grant in the lock key for ttl milliseconds and
  -- returns the value stored and, for a correctness lock, the grant's token.
  -- kind is the lock's kind as its owner's Locker runs it: 'e' for an
  -- efficiency lock (the value is the owner id), 'f' for a correctness lock,
  -- 'c' for a correctness lock with the clock floor. The token is
  -- max(counter + 1, server clock in microseconds) with the clock floor,
  -- counter + 1 without, and is stored back into the counter key; the value
  -- is "owner:token". time is a TIME reply the caller read already, for the
  -- clock floor, or nil.
  local function grant(lock, counter, owner, ttl, kind, time)
    if kind == 'e' then
      redis.call('SET', lock, owner, 'PX', ttl)
      return owner
    end
    local token
    if kind == 'c' then
      -- Store the clock and read the counter it replaces in one call (a
      -- counter of another type fails with WRONGTYPE, untouched). Nearly
      -- always the clock is ahead; when it is not, put the counter back and
      -- count on from it below.
      local now = micros(time)
      local current = redis.call('SET', counter, now, 'GET')
      -- now > current, as decimal strings; a (corrupt) negative counter is
      -- below any clock.
      if not current or string.sub(current, 1, 1) == '-' or #now > #current or #now == #current and now > current then
        token = now
      else
        redis.call('SET', counter, current)
      end
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

