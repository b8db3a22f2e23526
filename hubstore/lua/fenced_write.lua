-- fenced_write.lua: write a value to a fenced resource only for the holder of a token that
-- is not stale. This is the storage-side half of fencing: a holder that lost its lease (paused,
-- partitioned) and wakes up with an old token is refused here even if it never noticed the
-- loss. The token alone is public (`hubsync lease show` prints it), so the writer must also
-- present the proof acquire handed the holder of that token.
--
-- KEYS[1]  hubsync:lease:{RES}                 lease hash (holder, token, proof hash; its
--                                              fence = highest token issued)
-- KEYS[2]  hubsync:lease:{RES}:fenced:{NAME}   hash: value, token (highest token written
--                                              with), written_ms
-- ARGV[1]  fencing token presented by the writer
-- ARGV[2]  the value to store
-- ARGV[3]  holder id of the writer
-- ARGV[4]  SHA-256 hex of the writer's proof secret
--
-- Returns {status, highest}:
--   "written"        stored; highest is now the presented token
--   "stale"          the resource has already been written under a larger token
--   "superseded"     a larger token has been issued on the lease (a newer holder exists)
--   "unknown_token"  the token was never issued on this lease
--   "not_holder"     the token is current, but holder or proof are not its holder's (or the
--                    lease was released)
-- highest is the largest token the resource or the lease has seen.

--! include lease_common

local presented = tonumber(ARGV[1])
local lease = read_lease(KEYS[1])
local fence = lease.fence
local highest = read_int(redis.call('HGET', KEYS[2], 'token')) or 0
local seen = math.max(fence, highest)

if presented < highest then return {'stale', seen} end
if presented > fence then return {'unknown_token', seen} end
if presented < fence then return {'superseded', seen} end
if lease.token ~= presented or lease.holder ~= ARGV[3] or lease.proof ~= ARGV[4] then
  return {'not_holder', seen}
end

local now = redis_now_ms()
redis.call('HSET', KEYS[2], 'value', ARGV[2], 'token', string.format('%d', presented),
  'written_ms', string.format('%d', now))
return {'written', presented}
