-- lease_common.lua: the prelude of the library (redis_functions.py puts it once at the top,
-- before every function; it is never run alone).
--
-- MAX_TOKEN            2^53 - 1: the largest integer a Lua number (a double) holds exactly
-- read_int(value)      a field that must be a plain non-negative integer no larger than
--                      MAX_TOKEN, or nil (a larger one would come back rounded)
-- redis_now_ms()       Redis's own clock (TIME), in milliseconds
-- read_lease(key, counter_key)
--                      {holder, token, proof, deadline, fence, raw_token, raw_fence, unmigrated}
--                      of one lease: fence is the highest token ever issued on the resource, read
--                      from its counter (a string only ever INCRed); a token above it was never
--                      issued, so it counts as no lease. unmigrated: no counter yet, but the
--                      hash still has the fence of a hubsync before the counter
-- proof_digest(secret) what the lease hash keeps of a proof secret: its SHA-1, computed here
--                      from the secret the caller presents, so a digest read from Redis proves
--                      nothing
-- refusal(lease, presented, holder_id, secret, now, live_required)
--                      the reply refusing a caller that presents this token, holder and proof
--                      secret, or nil when the lease is theirs (and live, when live_required):
--                      "missing" | "superseded" | "held" | "expired" (see lease_renew.lua)

local MAX_TOKEN = 9007199254740991

local function read_int(value)
  -- 16 digits at most: MAX_TOKEN has 16, and tonumber of a longer one is already inexact
  if value and string.len(value) <= 16 and string.match(value, '^%d+$') then
    local number = tonumber(value)
    if number <= MAX_TOKEN then return number end
  end
  return nil
end

local function redis_now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function read_lease(key, counter_key)
  local cur = redis.call('HMGET', key, 'holder', 'token', 'proof', 'deadline_ms', 'fence')
  local raw_fence = redis.call('GET', counter_key)
  local fence = read_int(raw_fence) or 0
  local token = read_int(cur[2])
  if token and token > fence then token = nil end
  return {
    holder = cur[1], token = token, proof = cur[3], deadline = read_int(cur[4]),
    fence = fence, raw_token = cur[2], raw_fence = raw_fence,
    unmigrated = (not raw_fence) and cur[5] ~= false and cur[5] ~= '0',
  }
end

local function proof_digest(secret)
  return redis.sha1hex(secret)
end

-- The errors every lease function raises rather than guess a token: an unreadable counter,
-- a fence that predates the counter, and a counter at MAX_TOKEN when a new token is asked for.
local function lease_state_error(lease, key, need_new_token)
  if lease.raw_fence and not read_int(lease.raw_fence) then
    return redis.error_reply('ERR hubsync corrupt fence on ' .. key)
  end
  if lease.unmigrated then
    return redis.error_reply('ERR hubsync unmigrated fence on ' .. key)
  end
  if need_new_token and lease.fence >= MAX_TOKEN then
    return redis.error_reply('ERR hubsync tokens exhausted on ' .. key)
  end
  return nil
end

local function refusal(lease, presented, holder_id, secret, now, live_required)
  if not lease.holder or not lease.token then
    if presented < lease.fence then return {'superseded', 0, 0, now, ''} end
    return {'missing', 0, 0, now, ''}
  end
  local deadline = lease.deadline or 0
  if presented ~= lease.token then return {'superseded', lease.token, deadline, now, lease.holder} end
  if lease.holder ~= holder_id or lease.proof ~= proof_digest(secret) then
    return {'held', lease.token, deadline, now, lease.holder}
  end
  -- A deadline Redis cannot read is an expired deadline.
  if live_required and (not lease.deadline or lease.deadline <= now) then
    return {'expired', lease.token, deadline, now, lease.holder}
  end
  return nil
end
