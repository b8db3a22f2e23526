-- lease_renew.lua: extend a live lease under the token it was granted with.
--
-- KEYS[1]  hubsync:lease:{RES}          hash (see lease_acquire.lua)
-- KEYS[2]  hubsync:lease:{RES}:log      stream: audit log (capped)
-- KEYS[3]  hubsync:lease:{RES}:counter  the highest token ever issued
-- ARGV[1]  holder id
-- ARGV[2]  fencing token the holder was granted
-- ARGV[3]  the holder's proof secret
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

local now = redis_now_ms()
local lease = read_lease(KEYS[1], KEYS[3])
local refused = refusal(lease, tonumber(ARGV[2]), ARGV[1], ARGV[3], now, true)
if refused then return refused end
local holder, token = lease.holder, lease.token

local new_deadline = now + tonumber(ARGV[4])
redis.call('HSET', KEYS[1], 'deadline_ms', string.format('%d', new_deadline), 'ttl_ms', ARGV[4])
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], '*', 'event', 'renewed', 'holder', holder,
  'token', string.format('%d', token), 'ttl_ms', ARGV[4],
  'deadline_ms', string.format('%d', new_deadline))
return {'renewed', token, new_deadline, now, holder}
