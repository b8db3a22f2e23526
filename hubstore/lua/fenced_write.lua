-- fenced_write.lua: write a value to a fenced resource only under a token that is not stale.
-- This is the storage-side half of fencing: a holder that lost its lease (paused, partitioned)
-- and wakes up with an old token is refused here even if it never noticed the loss.
--
-- KEYS[1]  hubsync:lease:{RES}                 lease hash (its fence = highest token issued)
-- KEYS[2]  hubsync:lease:{RES}:fenced:{NAME}   hash: value, token (highest token written
--                                              with), written_ms
-- ARGV[1]  fencing token presented by the writer
-- ARGV[2]  the value to store
--
-- Returns {status, highest}:
--   "written"        stored; highest is now the presented token
--   "stale"          the resource has already been written under a larger token
--   "superseded"     a larger token has been issued on the lease (a newer holder exists)
--   "unknown_token"  the token was never issued on this lease
-- highest is the largest token the resource or the lease has seen.

local function read_int(value)
  if value and string.match(value, '^%d+$') then return tonumber(value) end
  return nil
end

local presented = tonumber(ARGV[1])
local lease = redis.call('HMGET', KEYS[1], 'token', 'fence')
local fence = math.max(read_int(lease[2]) or 0, read_int(lease[1]) or 0)
local highest = read_int(redis.call('HGET', KEYS[2], 'token')) or 0
local seen = math.max(fence, highest)

if presented < highest then return {'stale', seen} end
if presented > fence then return {'unknown_token', seen} end
if presented < fence then return {'superseded', seen} end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[2], 'value', ARGV[2], 'token', string.format('%d', presented),
  'written_ms', string.format('%d', now))
return {'written', presented}
