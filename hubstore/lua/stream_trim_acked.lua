-- stream_trim_acked.lua: trim an events stream below what consumer group GROUP still needs.
-- Decided in one function so no entry can be delivered (and become pending) between reading the
-- group's state and trimming: an entry is removed only if it is older than the oldest entry
-- still pending for GROUP and not newer than GROUP's last-delivered id (so it was acked).
--
-- KEYS[1]  hubsync:{P}:events   the stream to trim
-- ARGV[1]  consumer group name  (hub)
--
-- Returns {removed, threshold}: how many entries XTRIM removed and the MINID it trimmed to
-- ('' when nothing could be trimmed: no stream, no such group, nothing delivered yet).

if redis.call('EXISTS', KEYS[1]) == 0 then return {0, ''} end

local last = nil
for _, group in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local name, delivered = nil, nil
  for i = 1, #group, 2 do
    if group[i] == 'name' then name = group[i + 1] end
    if group[i] == 'last-delivered-id' then delivered = group[i + 1] end
  end
  if name == ARGV[1] then last = delivered end
end
if last == nil or last == '0-0' then return {0, ''} end

-- Every pending entry was delivered, so the oldest pending id is never above last-delivered.
-- Without pending entries the last delivered entry itself is kept: harmless, and it avoids
-- computing the id just above it.
local threshold = last
local summary = redis.call('XPENDING', KEYS[1], ARGV[1])
if tonumber(summary[1]) > 0 then threshold = summary[2] end

local removed = redis.call('XTRIM', KEYS[1], 'MINID', threshold)
return {removed, threshold}
