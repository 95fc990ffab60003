-- lease: the function that reads a lock's lease from its value, prepended
-- (scripts.go, after prelude.lua) to the scripts that read a lock without
-- holding it: the election's and inspect.
--
-- lease(held) takes a lock's value as GET returns it (not nil), and returns
-- the grant's value without the mark, and what is left of its lease in ms
-- (prelude.lua's read_value), or the key's PTTL when the value records no
-- expiry (-1: none); or nil and 0 when the lease lapsed (its holder died or
-- froze with waiters queued: the key outlives it until the first live
-- waiter is served).
local function lease(held)
  local grant, _, left = read_value(held)
  if not left then
    return grant, redis.call('PTTL', KEYS[1])
  elseif left == 0 then
    return nil, 0
  end
  return grant, left
end
