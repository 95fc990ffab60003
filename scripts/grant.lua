-- grant: the one function that grants a lock, prepended (scripts.go) to
-- every script that does: fenced_acquire, wait and release.
--
-- grant(owner, ttl, kind, now) stores owner's grant in the lock KEYS[1] for
-- ttl ms and returns the value stored and, for a fenced kind, its token; or
-- nil and a BADFENCE error text when the fence counter KEYS[3] holds no
-- token (nothing is changed then). kind: 'e' efficiency (value = owner), 'f'
-- fenced, 'c' fenced with the clock floor, 't' also with a counter that
-- expires with the lease. A fenced value is "owner:token". now is the TIME
-- reply of a call that serves the queue (wait, release): the lock is free,
-- and the grant carries the mark of waiters with its lease's expiry
-- (prelude.lua's restart). Without now, a lone acquire (fenced_acquire: a
-- fenced kind) takes the lock only if it is free: otherwise false and the
-- holder's value.
--
-- The token is max(counter + 1, server clock in µs) with the clock floor,
-- counter + 1 without. Tokens stay decimal strings, compared by length then
-- text: tostring() of a Lua number above 1e14 rounds (%.14g). A counter
-- more than an hour ahead of the clock (a clock that ran fast and was set
-- back, or a forged value) is refused as the Register refuses such a token.
local function grant(owner, ttl, kind, now)
  local served = now ~= nil
  if kind == 'e' then
    restart(owner, ttl, now)
    return owner
  end
  local token, current, taken
  if kind == 'f' then
    if not served then
      local holder = redis.call('GET', KEYS[1])
      if holder then
        return false, holder
      end
    end
    current = redis.pcall('GET', KEYS[3])
  else
    now = now or redis.call('TIME')
    token = now[1] .. string.rep('0', 6 - #now[2]) .. now[2]
    if not served then
      -- Take the lock with the clock as its token (nearly always the
      -- winner) before touching the counter.
      local value = owner .. ':' .. token
      local holder = redis.call('SET', KEYS[1], value, 'NX', 'PX', ttl, 'GET')
      if holder then
        return false, holder
      end
      taken = value -- the value this call stored
    end
    -- Store the clock and read what it replaces; put back below if ahead.
    if kind == 't' then
      current = redis.pcall('SET', KEYS[3], token, 'PX', ttl, 'GET')
    else
      current = redis.pcall('SET', KEYS[3], token, 'GET')
    end
  end
  if current then
    -- current is a GET's reply, or the error table of one that met a key
    -- of another type. A token is digits without a leading zero, below
    -- 2^63 - 1 so that INCR can count on.
    local bad
    if type(current) == 'table' then
      bad = 'holds a key of another type (' .. tostring(current.err) .. ')'
    elseif #current > 19 or current ~= '0' and not string.find(current, '^[1-9]%d*$') then
      bad = 'holds "' .. string.sub(current, 1, 40) .. '", not a fencing token (decimal digits below 2^63-1)'
    elseif #current == 19 and current >= '9223372036854775807' then
      bad = 'holds ' .. current .. ', the largest token there is: no larger one can be drawn'
    elseif token and (#current > #token or #current == #token and current > token) then
      -- Only a counter ahead of the clock can be an hour ahead of it: the
      -- ceiling is built for that one alone.
      local ceiling = (now[1] + 3600) .. string.sub(token, -6)
      if #current > #ceiling or #current == #ceiling and current > ceiling then
        bad = 'holds ' .. current .. ', more than an hour ahead of the server clock (' .. token ..
            ' µs): every fence refuses such a token (did the clock run fast and get set back?)'
      end
    end
    if bad then
      if token and type(current) == 'string' then
        redis.call('SET', KEYS[3], current)
      end
      if taken then
        redis.call('DEL', KEYS[1])
      end
      return nil, 'BADFENCE fence counter ' .. KEYS[3] .. ' ' .. bad .. '; repair or delete it'
    end
    if token and (#token < #current or #token == #current and token <= current) then
      if kind == 't' then
        redis.call('SET', KEYS[3], current, 'PX', ttl)
      else
        redis.call('SET', KEYS[3], current)
      end
      token = nil
    end
  end
  if token then
    if taken then
      return taken, token
    end
  else
    -- INCR's reply is exact below 2^53; above, Redis's own string.
    local n = redis.call('INCR', KEYS[3])
    if n < 9007199254740992 then
      token = string.format('%d', n)
    else
      token = redis.call('GET', KEYS[3])
    end
  end
  local value = owner .. ':' .. token
  if served then
    restart(value, ttl, now)
  else
    redis.call('SET', KEYS[1], value, 'PX', ttl)
  end
  return value, token
end
