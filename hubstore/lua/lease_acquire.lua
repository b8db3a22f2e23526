-- lease_acquire.lua: take a lease, renew one's own, or take over an expired one.
--
-- KEYS[1]  hubsync:lease:{RES}       hash: holder, token, proof, deadline_ms, acquired_ms,
--                                    ttl_ms, fence (highest token ever issued; never deleted)
-- KEYS[2]  hubsync:lease:{RES}:log   stream: audit log of transitions (capped)
-- ARGV[1]  holder id
-- ARGV[2]  SHA-256 hex of the new proof secret (stored only if a new token is issued)
-- ARGV[3]  TTL in milliseconds
-- ARGV[4]  SHA-256 hex of the proof the caller already holds, or "" (own-lease re-acquire)
-- ARGV[5]  approximate cap of the audit stream (MAXLEN ~)
--
-- Returns {status, token, deadline_ms, now_ms, holder}:
--   status "acquired"   free resource, new token (fence + 1)
--          "taken_over" the previous lease had expired (or its deadline was unreadable), new token
--          "renewed"    the caller's own live lease (same holder and proof): same token, new deadline
--          "held"       another live lease (or the holder's name without its proof); token,
--                       deadline and holder are the current holder's
-- Errors: "ERR hubsync corrupt fence" when the fence field exists but is not an integer
--         of at most 2^53 - 1 (1e20 included), because guessing would risk handing out a
--         token twice; "ERR hubsync tokens exhausted" when the fence is 2^53 - 1, since the
--         next token could not be told from the one before it.
--
-- Deadlines come from Redis TIME (Redis 7 replicates script effects, so TIME is allowed).

--! include lease_common

local now = redis_now_ms()
local ttl = tonumber(ARGV[3])

local lease = read_lease(KEYS[1])
if lease.raw_fence and not read_int(lease.raw_fence) then
  return redis.error_reply('ERR hubsync corrupt fence on ' .. KEYS[1])
end
local holder, token, proof, deadline, fence = lease.holder, lease.token, lease.proof,
  lease.deadline, lease.fence

-- A deadline Redis cannot read is an expired deadline: the alternative, a lease
-- nobody can ever take over, is the worse failure.
local live = holder and token and deadline and deadline > now

if live then
  if holder == ARGV[1] and ARGV[4] ~= '' and proof == ARGV[4] then
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

if fence >= MAX_TOKEN then
  return redis.error_reply('ERR hubsync tokens exhausted on ' .. KEYS[1])
end
local status = 'acquired'
if holder then status = 'taken_over' end
local new_token = fence + 1
local new_deadline = now + ttl
redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'token', string.format('%d', new_token),
  'proof', ARGV[2], 'deadline_ms', string.format('%d', new_deadline),
  'acquired_ms', string.format('%d', now), 'ttl_ms', string.format('%d', ttl),
  'fence', string.format('%d', new_token))
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
