-- piidx schema 29: a pi_agent_rust session's name is the latest
-- `session_info` that has a name, as written (its session_index.rs and
-- session.rs `get_name`: a `session_info` without one leaves the name as it
-- was). Pi's rule (trimmed, an empty or missing name clears it) was applied
-- to the port's sessions too.
--
-- The port's sessions are read again by the next sync (their files marked
-- as read by an older parser), so an upgraded index holds what a fresh
-- sync writes.
UPDATE files SET parser_version = 0
 WHERE file_id IN (SELECT file_id FROM sessions WHERE agent = 'pi_agent_rust');
