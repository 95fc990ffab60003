-- register_claim: raise a register's fence to a token before reading it.
-- (register_fence.lua is prepended.)
--
-- KEYS[1]  the register key
-- ARGV[1]  the claimer's fencing token, a decimal string without leading zeros
-- ARGV[2]  'c' to refuse a token beyond the clock ceiling, '' not to
-- ARGV[3]  optional: the register's retention in ms, with 'c' only (ignored
--          without: the clock floor rests on the ceiling); each claim it
--          accepts restarts the key's expiry, and a missing register is held
--          to the clock floor (register_fence.lua). Absent or '': no expiry.
--
-- Reply: 'ok writer value' when the token was recorded as claimed, with the
-- token that wrote the value (the value, the rest of the string, may hold
-- spaces; 'ok 0' when the register holds none); otherwise refused's reply
-- ('corrupt field text', 'stale highest', 'floor floor' or 'ahead
-- ceiling') and nothing changed.
local keep = ARGV[2] == 'c' and ARGV[3] ~= '' and ARGV[3] or nil
local h = redis.call('HMGET', KEYS[1], 'token', 'claimed', 'value')
local no = refused(h[1], h[2], ARGV[1], ARGV[2], keep)
if no then
  return no
end
if h[2] ~= ARGV[1] then
  redis.call('HSET', KEYS[1], 'claimed', ARGV[1])
end
if keep then
  redis.call('PEXPIRE', KEYS[1], keep)
end
if h[3] then
  return 'ok ' .. (h[1] or '0') .. ' ' .. h[3]
end
return 'ok ' .. (h[1] or '0')
