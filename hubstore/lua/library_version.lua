-- library_version.lua: is this version of hubsync's library loaded here? A process calls it
-- once at start, so a Redis without the library (or with an older one) is said before any
-- work: the call itself fails with "Function not found".
--! flags no-writes
--
-- KEYS  none
-- ARGV  none
--
-- Returns the library's name; its version is in this function's name.

return 'hubsync'
