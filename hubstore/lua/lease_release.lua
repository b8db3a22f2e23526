-- lease_release.lua: give a lease back. The counter is untouched, so the next token is still
-- larger than every token ever issued on this resource.
--
-- KEYS[1]  hubsync:lease:{RES}          hash (see lease_acquire.lua)
-- KEYS[2]  hubsync:lease:{RES}:log      stream: audit log (capped)
-- KEYS[3]  hubsync:lease:{RES}:counter  the highest token ever issued
-- ARGV[1]  holder id
-- ARGV[2]  fencing token the holder was granted
-- ARGV[3]  the holder's proof secret
-- ARGV[4]  approximate cap of the audit stream (MAXLEN ~)
--
-- Returns {status, token, deadline_ms, now_ms, holder}:
--   "released"    the lease is free again (an expired lease nobody took over may be released too)
--   "missing"     no lease on the resource and the token is not stale
--   "superseded"  a newer token has been issued since this one
--   "held"        the token is current but holder or proof do not match

local now = redis_now_ms()
local lease = read_lease(KEYS[1], KEYS[3])
-- An expired lease nobody took over may still be released by its holder.
local refused = refusal(lease, tonumber(ARGV[2]), ARGV[1], ARGV[3], now, false)
if refused then return refused end
local holder, token, deadline = lease.holder, lease.token, lease.deadline

redis.call('HDEL', KEYS[1], 'holder', 'token', 'proof', 'deadline_ms', 'acquired_ms', 'ttl_ms')
redis.call('HSET', KEYS[1], 'released_ms', string.format('%d', now))
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], '*', 'event', 'released', 'holder', holder,
  'token', string.format('%d', token))
return {'released', token, deadline or 0, now, holder}
