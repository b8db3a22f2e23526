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
-- Errors: "ERR hubsync corrupt fence" when the fence field exists but is not an integer,
--         because guessing would risk handing out a token twice.
--
-- Deadlines come from Redis TIME (Redis 7 replicates script effects, so TIME is allowed).

local function read_int(value)
  if value and string.match(value, '^%d+$') then return tonumber(value) end
  return nil
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])

local cur = redis.call('HMGET', KEYS[1], 'holder', 'token', 'proof', 'deadline_ms', 'fence')
local holder, token, proof, deadline, fence_raw = cur[1], read_int(cur[2]), cur[3], read_int(cur[4]), cur[5]

local fence = read_int(fence_raw)
if fence_raw and not fence then
  return redis.error_reply('ERR hubsync corrupt fence on ' .. KEYS[1])
end
fence = math.max(fence or 0, token or 0)

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
    'previous_holder', holder, 'previous_token', cur[2] or '')
else
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], '*', 'event', status,
    'holder', ARGV[1], 'token', string.format('%d', new_token), 'ttl_ms', string.format('%d', ttl),
    'deadline_ms', string.format('%d', new_deadline))
end
return {status, new_token, new_deadline, now, ARGV[1]}
