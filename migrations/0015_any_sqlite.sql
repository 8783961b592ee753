-- Full-text search that every SQLite tool finds (sqlite3, Datasette,
-- sqlite-utils), with SQLite 3.37 and later.

-- Datasette and sqlite-utils recognise an FTS table of a table only when it
-- names its content table in double quotes or brackets: `artifact_fts`
-- (migration 0002) used single quotes. Same table, declared so they see it.
DROP TABLE artifact_fts;
CREATE VIRTUAL TABLE artifact_fts USING fts5(
  text,
  content="subagent_artifacts",
  content_rowid="artifact_id",
  tokenize = "unicode61 remove_diacritics 2"
);
INSERT INTO artifact_fts(artifact_fts) VALUES ('rebuild');

-- The conversation: user and assistant messages that have text (their
-- text blocks joined by a newline, as in `messages`; not thinking or tool
-- calls), with the time as ISO-8601 text. The content of `message_fts`.
CREATE VIEW v_message_text AS
SELECT entry_rowid, file_id, session_id, entry_id, role, time, model, text
FROM (SELECT m.entry_rowid, m.file_id, m.session_id, m.entry_id, m.role,
             strftime('%Y-%m-%dT%H:%M:%fZ', m.timestamp_ms / 1000.0, 'unixepoch') AS time,
             m.model,
             (SELECT group_concat(t.text, char(10))
                FROM (SELECT json_extract(e.raw, c.json_path) AS text
                        FROM chunks c
                       WHERE c.entry_rowid = m.entry_rowid AND c.start = 0 AND c.fts_rowid IS NULL
                         AND c.kind IN ('user', 'assistant')
                         AND (c.json_path = '$.message.content' OR c.json_path LIKE '$.message.content[%')
                       ORDER BY c.chunk_id) t) AS text
        FROM message_meta m JOIN entries e ON e.entry_rowid = m.entry_rowid
       WHERE m.role IN ('user', 'assistant'))
WHERE text <> '';

-- A word index of `v_message_text` in the main file (external content: the
-- text is not stored again), so that `sqlite3`, Datasette and sqlite-utils
-- can search and cut snippets without the shards. `sync` keeps it current.
CREATE VIRTUAL TABLE message_fts USING fts5(
  text,
  session_id UNINDEXED,
  role UNINDEXED,
  time UNINDEXED,
  content="v_message_text",
  content_rowid="entry_rowid",
  tokenize = "unicode61 remove_diacritics 2"
);
INSERT INTO message_fts(message_fts) VALUES ('rebuild');

-- Sessions with their times as ISO-8601 text (Datasette shows these as
-- dates), newest activity first when sorted by `last_activity`.
CREATE VIEW v_sessions AS
SELECT s.file_id, s.session_id, s.name, s.project_dir, s.cwd,
       s.created_at AS created,
       strftime('%Y-%m-%dT%H:%M:%fZ', s.modified_ms / 1000.0, 'unixepoch') AS last_activity,
       s.message_count, s.entry_count, s.first_message, s.file_path
FROM sessions s;
