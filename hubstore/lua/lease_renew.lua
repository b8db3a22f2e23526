-- lease_renew.lua: extend a live lease under the token it was granted with.
--
-- KEYS[1]  hubsync:lease:{RES}       hash (see lease_acquire.lua)
-- KEYS[2]  hubsync:lease:{RES}:log   stream: audit log (capped)
-- ARGV[1]  holder id
-- ARGV[2]  fencing token the holder was granted
-- ARGV[3]  SHA-256 hex of the holder's proof secret
-- ARGV[4]  TTL in milliseconds (the new deadline is Redis TIME + TTL)
-- ARGV[5]  approximate cap of the audit stream (MAXLEN ~)
--
-- Returns {status, token, deadline_ms, now_ms, holder}; token/deadline/holder are the
-- current lease's (0/0/"" when there is none):
--   "renewed"     same token, new deadline
--   "missing"     no lease on the resource (never taken, or released) and the token is not stale
--   "superseded"  a newer token has been issued since this one
--   "held"        the token is current but holder or proof do not match
--   "expired"     the deadline has passed (or cannot be read); never resurrected

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

local new_deadline = now + tonumber(ARGV[4])
redis.call('HSET', KEYS[1], 'deadline_ms', string.format('%d', new_deadline), 'ttl_ms', ARGV[4])
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], '*', 'event', 'renewed', 'holder', holder,
  'token', string.format('%d', token), 'ttl_ms', ARGV[4],
  'deadline_ms', string.format('%d', new_deadline))
return {'renewed', token, new_deadline, now, holder}
