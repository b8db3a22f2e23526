-- lease_acquire.lua: take a lease, renew one's own, or take over an expired one.
--
-- KEYS[1]  hubsync:lease:{RES}          hash: holder, token, proof (SHA-1 of the holder's
--                                       secret), deadline_ms, acquired_ms, ttl_ms
-- KEYS[2]  hubsync:lease:{RES}:log      stream: audit log of transitions (capped)
-- KEYS[3]  hubsync:lease:{RES}:counter  string: the highest token ever issued (only INCRed)
-- ARGV[1]  holder id
-- ARGV[2]  the new proof secret (its digest is stored only if a new token is issued)
-- ARGV[3]  TTL in milliseconds
-- ARGV[4]  the proof secret the caller already holds, or "" (own-lease re-acquire)
-- ARGV[5]  approximate cap of the audit stream (MAXLEN ~)
--
-- Returns {status, token, deadline_ms, now_ms, holder}:
--   status "acquired"   free resource, new token (INCR of the counter)
--          "taken_over" the previous lease had expired (or its deadline was unreadable), new token
--          "renewed"    the caller's own live lease (same holder and proof): same token, new deadline
--          "held"       another live lease (or the holder's name without its proof); token,
--                       deadline and holder are the current holder's
-- Errors: "ERR hubsync corrupt fence" when the counter is not an integer of at most 2^53 - 1;
--         "ERR hubsync unmigrated fence" when the hash has the fence of an older hubsync and
--         there is no counter yet (hubsync hub migrate moves it); "ERR hubsync tokens
--         exhausted" when the counter is 2^53 - 1: guessing would risk a token issued twice.
--
-- Deadlines come from Redis TIME (functions replicate their effects, so TIME is allowed).

local now = redis_now_ms()
local ttl = tonumber(ARGV[3])

local lease = read_lease(KEYS[1], KEYS[3])
local holder, token, deadline = lease.holder, lease.token, lease.deadline

-- A deadline Redis cannot read is an expired deadline: the alternative, a lease
-- nobody can ever take over, is the worse failure.
local live = holder and token and deadline and deadline > now

if live then
  if holder == ARGV[1] and ARGV[4] ~= '' and lease.proof == proof_digest(ARGV[4]) then
    local new_deadline = now + ttl
    redis.call('HSET', KEYS[1], 'deadline_ms', string.format('%d', new_deadline),
      'ttl_ms', string.format('%d', ttl))
    redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], '*', 'event', 'renewed',
      'holder', holder, 'token', string.format('%d', token), 'ttl_ms', string.format('%d', ttl),
      'deadline_ms', string.format('%d', new_deadline))
    return {'renewed', token, new_deadline, now, holder}
  end
  return {'held', token, deadline, now, holder}
end

local broken = lease_state_error(lease, KEYS[1], true)
if broken then return broken end
local status = 'acquired'
if holder then status = 'taken_over' end
local new_token = redis.call('INCR', KEYS[3])
local new_deadline = now + ttl
redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'token', string.format('%d', new_token),
  'proof', proof_digest(ARGV[2]), 'deadline_ms', string.format('%d', new_deadline),
  'acquired_ms', string.format('%d', now), 'ttl_ms', string.format('%d', ttl))
if holder then
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], '*', 'event', status,
    'holder', ARGV[1], 'token', string.format('%d', new_token), 'ttl_ms', string.format('%d', ttl),
    'deadline_ms', string.format('%d', new_deadline),
    'previous_holder', holder, 'previous_token', lease.raw_token or '')
else
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], '*', 'event', status,
    'holder', ARGV[1], 'token', string.format('%d', new_token), 'ttl_ms', string.format('%d', ttl),
    'deadline_ms', string.format('%d', new_deadline))
end
return {status, new_token, new_deadline, now, ARGV[1]}
