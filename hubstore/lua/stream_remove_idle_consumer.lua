-- stream_remove_idle_consumer.lua: delete a consumer from a group only if it owns no pending entry.
-- XGROUP DELCONSUMER drops the consumer's pending entries with it, and an entry dropped from
-- the pending list is never reclaimed; checking and deleting in one function closes the window
-- in which the consumer could read new entries between the check and the delete.
--
-- KEYS[1]  hubsync:{P}:events   the stream
-- ARGV[1]  consumer group name  (hub)
-- ARGV[2]  consumer name to remove
--
-- Returns 1 if the consumer was removed, 0 if it still owns pending entries (kept).

local pending = redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2])
if #pending > 0 then return 0 end
redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
return 1
