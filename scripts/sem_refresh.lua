-- sem_refresh: restart the ttl of the caller's permit of a semaphore, if it
-- still holds one. (prelude.lua, queue.lua and semaphore.lua are
-- prepended.)
--
-- KEYS     the permits (with the header) and the wait queue (see semaphore.lua)
-- ARGV[1]  the caller's owner id
-- ARGV[2]  the new ttl in milliseconds
--
-- Reply:
--   1   the ttl was set
--   0   the caller holds no permit (it expired, or was released or taken),
--       and nothing changed
local s = open()
if renew(s) then
  return 1
end
return 0
