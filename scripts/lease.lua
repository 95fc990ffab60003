-- lease: the function that reads a lock's lease from its value, prepended
-- (scripts.go) to the scripts that read a lock without holding it: the
-- election's and inspect. The value with its mark of waiters is specified
-- in internal/lease/handoff.go.
--
-- lease(held) takes a lock's value as GET returns it (not nil), and returns
-- the grant's value without the mark, and what is left of its lease in ms:
-- the key's PTTL when the value records no expiry (-1: none); or nil and 0
-- when the lease lapsed (its holder died or froze with waiters queued: the
-- key outlives it until the first live waiter is served).
local function lease(held)
  local star = string.find(held, '*', 1, true)
  local expiry = star and tonumber(string.sub(held, star + 1))
  if star then
    held = string.sub(held, 1, star - 1)
  end
  if not expiry then
    return held, redis.call('PTTL', KEYS[1])
  end
  local now = redis.call('TIME')
  local left = expiry - tonumber(now[1]) * 1000 - math.floor(tonumber(now[2]) / 1000)
  if left <= 0 then
    return nil, 0
  end
  return held, left
end
