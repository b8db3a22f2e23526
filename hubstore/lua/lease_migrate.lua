-- lease_migrate.lua: move the fence an older hubsync kept in a lease hash into the lease's
-- token counter, never lowering the counter. Run by `hubsync hub migrate` as the Redis
-- administrator (a runtime's user may not SET a counter, so this fails for it).
--
-- KEYS[1]  hubsync:lease:{RES}          hash; its `fence` field, if any, is the old fence
-- KEYS[2]  hubsync:lease:{RES}:counter  the highest token ever issued
-- ARGV     none
--
-- Returns {status, counter}: "moved" (the counter is now at least the old fence and the
-- field is gone), "current" (no old fence field), "unreadable" (the field or the counter is
-- not an integer of at most 2^53 - 1: left as it is, and the lease keeps refusing).

local raw_fence = redis.call('HGET', KEYS[1], 'fence')
local raw_counter = redis.call('GET', KEYS[2])
local counter = read_int(raw_counter)
if raw_counter and not counter then return {'unreadable', 0} end
counter = counter or 0
if not raw_fence then return {'current', counter} end
local fence = read_int(raw_fence)
if not fence then return {'unreadable', counter} end
local token = read_int(redis.call('HGET', KEYS[1], 'token')) or 0
local highest = math.max(counter, fence, token)
if highest > counter or not raw_counter then
  redis.call('SET', KEYS[2], string.format('%d', highest))
end
redis.call('HDEL', KEYS[1], 'fence')
return {'moved', highest}
