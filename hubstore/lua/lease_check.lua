-- lease_check.lua: is this token, held by this holder with this proof, current and live?
-- Read-only; a commit under a lease calls it right before it writes.
--! flags no-writes
--
-- KEYS[1]  hubsync:lease:{RES}          hash (see lease_acquire.lua)
-- KEYS[2]  hubsync:lease:{RES}:counter  the highest token ever issued
-- ARGV[1]  holder id
-- ARGV[2]  fencing token the holder was granted
-- ARGV[3]  the holder's proof secret
--
-- Returns {status, token, deadline_ms, now_ms, holder}:
--   "current"     the lease is live under exactly this token, holder and proof
--   "missing" | "superseded" | "held" | "expired"   as in lease_renew.lua

local now = redis_now_ms()
local lease = read_lease(KEYS[1], KEYS[2])
local refused = refusal(lease, tonumber(ARGV[2]), ARGV[1], ARGV[3], now, true)
if refused then return refused end
return {'current', lease.token, lease.deadline, now, lease.holder}
