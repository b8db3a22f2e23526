-- hub_release.lua: delete the namespace's hub binding only if it names the given hub.
-- A GET then DEL from the client could delete a binding another hub made in between.
--
-- KEYS[1]  hubsync:hub   the hub id that owns the namespace's consumer group
-- ARGV[1]  hub id        the hub giving the namespace up
--
-- Returns 1 if the binding was deleted, 0 if it was missing or names another hub (kept).

if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
