-- register_fence: the check that register_write and register_claim share;
-- scripts.go prepends this file to each. A register is a hash: 'value', the
-- 'token' that wrote it, and 'claimed', the highest token that claimed it.
--
-- refused returns the reply that refuses token, or nil when token may claim
-- or write: {'stale', highest} when a newer token has claimed or written,
-- {'ahead', ceiling} when check is 'c' and a token new to the register is
-- beyond the ceiling (the server clock in microseconds plus an hour).
-- written and claimed are the register's 'token' and 'claimed' (false when
-- absent). Tokens are decimal strings without leading zeros, compared by
-- length and then by text: never through tostring(), whose %.14g rounds
-- them. One function, written out: each function a script defines is a
-- closure built anew on every call.
local function refused(written, claimed, token, check)
  local highest = written
  if claimed and (not highest or #claimed > #highest or #claimed == #highest and claimed > highest) then
    highest = claimed
  end
  local n = #token
  if highest and (#highest > n or #highest == n and highest >= token) then
    if highest == token then
      return nil -- the same grant again: the ceiling passed it already
    end
    return {'stale', highest}
  end
  -- TIME costs more than the rest: only a new token that could be beyond the
  -- ceiling pays for it (a shorter one is below any ceiling until 2286).
  if check == 'c' and n >= 16 then
    local now = redis.call('TIME')
    local ceiling = (now[1] + 3600) .. string.rep('0', 6 - #now[2]) .. now[2]
    if n > #ceiling or n == #ceiling and token > ceiling then
      return {'ahead', ceiling}
    end
  end
  return nil
end
