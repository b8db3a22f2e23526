-- lease_check.lua: is this token, held by this holder with this proof, current and live?
-- Read-only; a commit under a lease calls it right before it writes.
--
-- KEYS[1]  hubsync:lease:{RES}   hash (see lease_acquire.lua)
-- ARGV[1]  holder id
-- ARGV[2]  fencing token the holder was granted
-- ARGV[3]  SHA-256 hex of the holder's proof secret
--
-- Returns {status, token, deadline_ms, now_ms, holder}:
--   "current"     the lease is live under exactly this token, holder and proof
--   "missing" | "superseded" | "held" | "expired"   as in lease_renew.lua

local function read_int(value)
  if value and string.match(value, '^%d+$') then return tonumber(value) end
  return nil
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local presented = tonumber(ARGV[2])

local cur = redis.call('HMGET', KEYS[1], 'holder', 'token', 'proof', 'deadline_ms', 'fence')
local holder, token, proof, deadline = cur[1], read_int(cur[2]), cur[3], read_int(cur[4])
local fence = math.max(read_int(cur[5]) or 0, token or 0)

if not holder or not token then
  if presented < fence then return {'superseded', 0, 0, now, ''} end
  return {'missing', 0, 0, now, ''}
end
if presented ~= token then return {'superseded', token, deadline or 0, now, holder} end
if holder ~= ARGV[1] or proof ~= ARGV[3] then return {'held', token, deadline or 0, now, holder} end
if not deadline or deadline <= now then return {'expired', token, deadline or 0, now, holder} end
return {'current', token, deadline, now, holder}
