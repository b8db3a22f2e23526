-- lease_release.lua: give a lease back. The fence stays, so the next token is still larger
-- than every token ever issued on this resource.
--
-- KEYS[1]  hubsync:lease:{RES}       hash (see lease_acquire.lua)
-- KEYS[2]  hubsync:lease:{RES}:log   stream: audit log (capped)
-- ARGV[1]  holder id
-- ARGV[2]  fencing token the holder was granted
-- ARGV[3]  SHA-256 hex of the holder's proof secret
-- ARGV[4]  approximate cap of the audit stream (MAXLEN ~)
--
-- Returns {status, token, deadline_ms, now_ms, holder}:
--   "released"    the lease is free again (an expired lease nobody took over may be released too)
--   "missing"     no lease on the resource and the token is not stale
--   "superseded"  a newer token has been issued since this one
--   "held"        the token is current but holder or proof do not match

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

redis.call('HDEL', KEYS[1], 'holder', 'token', 'proof', 'deadline_ms', 'acquired_ms', 'ttl_ms')
-- The fence is rewritten (not just kept) so a release also repairs a missing fence field.
redis.call('HSET', KEYS[1], 'fence', string.format('%d', fence), 'released_ms', string.format('%d', now))
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], '*', 'event', 'released', 'holder', holder,
  'token', string.format('%d', token))
return {'released', token, deadline or 0, now, holder}
