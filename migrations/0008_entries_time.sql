-- piidx schema 8: entries indexed by time.
--
-- A scan search (`--substring`, and CJK terms under 3 characters) lists
-- chunks newest first and stops at enough hits. Without an index on
-- entries.timestamp_ms it had to read every entry row and sort every chunk
-- before the first one was looked at: ~0.3 s on a 1 GB corpus even when the
-- newest chunks held the hits. The index is about 2 MB per GB of sessions;
-- queries on a range of `timestamp_ms` use it too.
CREATE INDEX entries_time ON entries(timestamp_ms);
