-- piidx schema 28: oh-my-pi lists a session without user text by its first
-- developer or assistant text (session-listing.ts,
-- extractFirstDisplayMessageFromPrefix), where Pi lists "(no messages)".
--
-- sessions.first_other_text: the first developer or assistant message's
-- first text, kept while the session has no user text (NULL once it has
-- one), whatever its agent: a session may turn out to be omp's only in a
-- later batch. An omp session's first_message is that text while it is set,
-- so the first user text still replaces it when it comes.
--
-- The sessions an older piidx left without a first message are read again
-- by the next sync (their files marked as read by an older parser), so an
-- upgraded index holds what a fresh sync writes.
ALTER TABLE sessions ADD COLUMN first_other_text TEXT;
UPDATE files SET parser_version = 0
 WHERE file_id IN (SELECT file_id FROM sessions WHERE first_message IS NULL);
