-- fenced_write.lua: write a value to a fenced resource only for the holder of a token that
-- is not stale. This is the storage-side half of fencing: a holder that lost its lease (paused,
-- partitioned) and wakes up with an old token is refused here even if it never noticed the
-- loss. The token alone is public (`hubsync lease show` prints it), so the writer must also
-- present the proof secret acquire handed the holder of that token. The value remembers the
-- highest token written with and its holder: a lower token, or the same token from another
-- holder, is refused even if the lease hash was rewritten.
--
-- KEYS[1]  hubsync:lease:{RES}                 lease hash (holder, token, proof digest)
-- KEYS[2]  hubsync:lease:{RES}:fenced:{NAME}   hash: value, token (highest token written
--                                              with), holder (its holder), written_ms
-- KEYS[3]  hubsync:lease:{RES}:counter         the highest token ever issued
-- ARGV[1]  fencing token presented by the writer
-- ARGV[2]  the value to store
-- ARGV[3]  holder id of the writer
-- ARGV[4]  the writer's proof secret
--
-- Returns {status, highest}:
--   "written"        stored; highest is now the presented token
--   "stale"          the resource has already been written under a larger token
--   "superseded"     a larger token has been issued on the lease (a newer holder exists)
--   "unknown_token"  the token was never issued on this lease
--   "not_holder"     the token is current, but holder or proof are not its holder's (or the
--                    lease was released), or the value was written under it by another holder
-- highest is the largest token the resource or the lease has seen.

local presented = tonumber(ARGV[1])
local lease = read_lease(KEYS[1], KEYS[3])
local broken = lease_state_error(lease, KEYS[1], false)
if broken then return broken end
local fence = lease.fence
local written = redis.call('HMGET', KEYS[2], 'token', 'holder')
local highest = read_int(written[1]) or 0
local seen = math.max(fence, highest)

if presented < highest then return {'stale', seen} end
if presented == highest and written[2] and written[2] ~= ARGV[3] then
  return {'not_holder', seen}
end
if presented > fence then return {'unknown_token', seen} end
if presented < fence then return {'superseded', seen} end
if lease.token ~= presented or lease.holder ~= ARGV[3] or lease.proof ~= proof_digest(ARGV[4]) then
  return {'not_holder', seen}
end

local now = redis_now_ms()
redis.call('HSET', KEYS[2], 'value', ARGV[2], 'token', string.format('%d', presented),
  'holder', ARGV[3], 'written_ms', string.format('%d', now))
return {'written', presented}
