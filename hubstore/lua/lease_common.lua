-- lease_common.lua: the prelude every lease script starts with (lua_scripts.py puts it in the
-- place of the include line naming this file; it is never run alone).
--
-- MAX_TOKEN            2^53 - 1: the largest integer a Lua number (a double) holds exactly
-- read_int(value)      a field that must be a plain non-negative integer no larger than
--                      MAX_TOKEN, or nil (a larger one would come back rounded)
-- redis_now_ms()       Redis's own clock (TIME), in milliseconds
-- read_lease(key)      {holder, token, proof, deadline, fence, raw_token, raw_fence} of one
--                      lease hash; fence is the highest token ever issued on the resource
-- refusal(lease, presented, holder_id, proof_hash, now, live_required)
--                      the reply refusing a caller that presents this token, holder and proof,
--                      or nil when the lease is theirs (and live, when live_required):
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

local function read_lease(key)
  local cur = redis.call('HMGET', key, 'holder', 'token', 'proof', 'deadline_ms', 'fence')
  local token = read_int(cur[2])
  return {
    holder = cur[1], token = token, proof = cur[3], deadline = read_int(cur[4]),
    fence = math.max(read_int(cur[5]) or 0, token or 0), raw_token = cur[2], raw_fence = cur[5],
  }
end

local function refusal(lease, presented, holder_id, proof_hash, now, live_required)
  if not lease.holder or not lease.token then
    if presented < lease.fence then return {'superseded', 0, 0, now, ''} end
    return {'missing', 0, 0, now, ''}
  end
  local deadline = lease.deadline or 0
  if presented ~= lease.token then return {'superseded', lease.token, deadline, now, lease.holder} end
  if lease.holder ~= holder_id or lease.proof ~= proof_hash then
    return {'held', lease.token, deadline, now, lease.holder}
  end
  -- A deadline Redis cannot read is an expired deadline.
  if live_required and (not lease.deadline or lease.deadline <= now) then
    return {'expired', lease.token, deadline, now, lease.holder}
  end
  return nil
end
