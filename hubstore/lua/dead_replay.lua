-- dead_replay.lua: move dead letters back onto their project's events stream, each exactly once.
-- Decided in one function so a letter is re-added and deleted together: two operators replaying
-- the same id (or a replay racing a purge) put it back at most once, and a crash between the
-- XADD and the XDEL cannot leave it both replayed and still listed as dead.
-- The original fields are read here from the letter itself (its `field.<name>` fields), so what
-- goes back is exactly what was dead-lettered, never something the caller rebuilt.
--
-- KEYS[1]  hubsync:{P}:dead     the dead-letter stream
-- KEYS[2]  hubsync:{P}:events   the events stream the letters go back to
-- ARGV[1..n]  dead-letter entry ids
--
-- Returns one {status, new_id} per id, in order. status: 'replayed' (new_id is the new events
-- entry), 'missing' (no such letter), 'truncated' (its original fields were cut, so it was left
-- alone), 'empty' (it kept no original fields).

local prefix = 'field.'
local results = {}
for i, id in ipairs(ARGV) do
  local found = redis.call('XRANGE', KEYS[1], id, id)
  if #found == 0 then
    results[i] = {'missing', ''}
  else
    local fields = found[1][2]
    local original = {}
    local truncated = false
    for j = 1, #fields, 2 do
      local name = fields[j]
      if name == 'truncated' then
        truncated = true
      elseif string.sub(name, 1, #prefix) == prefix then
        original[#original + 1] = string.sub(name, #prefix + 1)
        original[#original + 1] = fields[j + 1]
      end
    end
    if truncated then
      results[i] = {'truncated', ''}
    elseif #original == 0 then
      results[i] = {'empty', ''}
    else
      local new_id = redis.call('XADD', KEYS[2], '*', unpack(original))
      redis.call('XDEL', KEYS[1], id)
      results[i] = {'replayed', new_id}
    end
  end
end
return results
