-- register_fence: the check that register_write and register_claim share;
-- scripts.go prepends this file to each. A register is a hash: 'value', the
-- 'token' that wrote it, and 'claimed', the highest token that claimed it.
--
-- refused returns the reply that refuses token, or nil when token may claim
-- or write, a string of fields as a lock's replies are (the last field is
-- the rest): 'corrupt field text' when the register's 'token' or 'claimed'
-- holds no token (text: its first 40 bytes); 'stale highest' when a newer
-- token has claimed or written; 'floor floor' when keep is set, the
-- register holds no token and token is below the clock floor (see below);
-- 'ahead ceiling' when check is 'c' and a token new to the register is
-- beyond the ceiling (the server clock in microseconds plus an hour).
-- written and claimed are the register's 'token' and 'claimed' (false when
-- absent).
--
-- keep (nil, or ms as a string, only with check 'c') is the retention of a
-- register that expires that long after the last token it accepted. One that
-- expired held tokens the ceiling let in, at most an hour ahead of the clock
-- when first accepted, which is at least keep ago: all below the clock floor,
-- the server clock in µs minus keep plus an hour and a second (the second
-- covers the gap between TIME and the time PEXPIRE counts from). A register
-- missing for any other reason (new, deleted, lost) is held to it too.
--
-- Tokens are decimal strings without leading zeros, from 1 to 2^64-1,
-- compared by length and then by text: never through tostring(), whose
-- %.14g rounds them. A field that is no token fails closed: compared as
-- text, it could rank below every token. One function, written out: each
-- function a script defines is a closure built anew on every call.
local function refused(written, claimed, token, check, keep)
  local highest = false
  for i = 1, 2 do
    local field, t = 'token', written
    if i == 2 then
      field, t = 'claimed', claimed
    end
    if t then
      if #t > 20 or not string.find(t, '^[1-9]%d*$') or #t == 20 and t > '18446744073709551615' then
        return 'corrupt ' .. field .. ' ' .. string.sub(t, 1, 40)
      end
      if not highest or #t > #highest or #t == #highest and t > highest then
        highest = t
      end
    end
  end
  local n = #token
  if highest and (#highest > n or #highest == n and highest >= token) then
    if highest == token then
      return nil -- the same grant again: the ceiling passed it already
    end
    return 'stale ' .. highest
  end
  local now
  if keep and not highest then
    now = redis.call('TIME')
    local floor = (now[1] - math.floor(keep / 1000) + 3601) .. string.rep('0', 6 - #now[2]) .. now[2]
    if n < #floor or n == #floor and token < floor then
      return 'floor ' .. floor
    end
  end
  -- TIME costs more than the rest: only a new token that could be beyond the
  -- ceiling pays for it (a shorter one is below any ceiling until 2286).
  if check == 'c' and n >= 16 then
    now = now or redis.call('TIME')
    local ceiling = (now[1] + 3600) .. string.rep('0', 6 - #now[2]) .. now[2]
    if n > #ceiling or n == #ceiling and token > ceiling then
      return 'ahead ' .. ceiling
    end
  end
  return nil
end
