-- register_fence: the check that register_write and register_claim share;
-- scripts.go prepends this file to each. A register is a hash: 'value', the
-- 'token' that wrote it, and 'claimed', the highest token that claimed it.
--
-- refused returns the reply that refuses token at the register key, or nil
-- when token may claim or write: {'ahead', ceiling} when check is 'c' and
-- token is beyond the ceiling (the server clock in microseconds plus an
-- hour), {'stale', highest} when a newer token has claimed or written.
-- Tokens are decimal strings without leading zeros, compared by length and
-- then by text: never through tostring(), whose %.14g rounds them.
local function refused(key, token, check)
  local function greater(a, b)
    if #a ~= #b then
      return #a > #b
    end
    return a > b
  end
  if check == 'c' then
    local now = redis.call('TIME')
    local ceiling = string.format('%d', (now[1] + 3600) * 1000000 + now[2])
    if greater(token, ceiling) then
      return {'ahead', ceiling}
    end
  end
  local h = redis.call('HMGET', key, 'token', 'claimed')
  local highest = h[1]
  if h[2] and (not highest or greater(h[2], highest)) then
    highest = h[2]
  end
  if highest and greater(highest, token) then
    return {'stale', highest}
  end
  return nil
end
