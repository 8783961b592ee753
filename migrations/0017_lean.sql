-- piidx schema 17: the index no larger than the sessions it holds.
--
-- Tool output is most of a session's bytes (two thirds of the bench
-- corpus), and it was stored whole in entries.raw. Its large strings (1 KB
-- or more, in tool results, bash executions and custom messages, and an
-- assistant message's thinking, tool-call arguments and signatures: all but
-- the conversation's text) now leave raw as the system prompt's values did
-- in 0011: one shared_texts row per distinct value (a
-- file read twice, a fork's copy of an output: stored and indexed once),
-- linked from the entry by shared_refs. A shared text of 512 bytes or more
-- is stored deflated when that is smaller: `deflated` holds a zlib stream,
-- the format of SQLite's SQL archives, and `text` is then ''. The `sqlite3`
-- shell has the function that reads it built in (`sqlar_uncompress`), and
-- piidx registers the same function on its own connections; the views
-- below give the text back. Parser version 6 makes the next sync re-index
-- every file, which moves the values.

ALTER TABLE shared_texts ADD COLUMN deflated BLOB;      -- zlib stream of the text, or NULL
ALTER TABLE shared_texts ADD COLUMN text_len INTEGER;   -- bytes of the text (sqlar_uncompress's size)

-- Every shared text as text, whichever way it is stored.
CREATE VIEW v_shared_texts AS
SELECT text_id, hash, is_json,
       CASE WHEN deflated IS NULL THEN text
            ELSE CAST(sqlar_uncompress(deflated, text_len) AS TEXT) END AS text,
       text_len, deflated IS NOT NULL AS is_deflated
FROM shared_texts;

DROP VIEW v_shared_values;
CREATE VIEW v_shared_values AS
SELECT r.entry_rowid, r.file_id, r.json_path, r.key, r.key_index, t.is_json, t.text
FROM shared_refs r JOIN v_shared_texts t ON t.text_id = r.text_id;

-- An entry as Pi wrote it, as one JSON value: entries.raw with its shared
-- values put back (image payloads stay in `blobs`, as in raw). Keys put
-- back come last in their object; `piidx export` gives the exact bytes.
CREATE VIEW v_entries AS
SELECT e.entry_rowid, e.file_id, e.session_id, e.entry_id, e.parent_id, e.type, e.timestamp,
       e.timestamp_ms, e.line_no,
       CASE WHEN NOT EXISTS (SELECT 1 FROM shared_refs r WHERE r.entry_rowid = e.entry_rowid)
            THEN e.raw
            ELSE (WITH RECURSIVE
                    refs(n, at, is_json, text) AS (
                      SELECT row_number() OVER (ORDER BY r.json_path, r.key_index),
                             r.json_path || '."' || r.key || '"', t.is_json, t.text
                        FROM shared_refs r JOIN v_shared_texts t ON t.text_id = r.text_id
                       WHERE r.entry_rowid = e.entry_rowid),
                    filled(n, json) AS (
                      SELECT 0, e.raw
                      UNION ALL
                      SELECT filled.n + 1,
                             json_set(filled.json, refs.at,
                                      CASE WHEN refs.is_json THEN json(refs.text) ELSE refs.text END)
                        FROM filled JOIN refs ON refs.n = filled.n + 1)
                  SELECT json FROM filled ORDER BY n DESC LIMIT 1)
       END AS raw
FROM entries e;

DROP VIEW fts_content;
CREATE VIEW fts_content(chunk_id, body) AS
SELECT chunk_id,
       CASE WHEN start = 0 AND len = field_len THEN text
            ELSE CAST(substr(CAST(text AS BLOB), start + 1, len) AS TEXT)
       END
FROM (SELECT c.chunk_id, c.start, c.len, c.field_len,
             CASE WHEN c.fts_rowid IS NULL THEN json_extract(e.raw, c.json_path)
                  ELSE (SELECT CASE WHEN sc.inner_path = '$' THEN st.text
                                    ELSE json_extract(st.text, sc.inner_path) END
                          FROM shared_chunks sc JOIN v_shared_texts st ON st.text_id = sc.text_id
                         WHERE sc.fts_rowid = c.fts_rowid) END AS text
        FROM chunks c JOIN entries e ON e.entry_rowid = c.entry_rowid);

DROP VIEW texts;
CREATE VIEW texts AS
SELECT c.entry_rowid, c.file_id, e.session_id, e.entry_id, c.json_path, c.kind,
       c.tool_name, c.field_len AS text_len,
       CASE WHEN c.fts_rowid IS NULL THEN json_extract(e.raw, c.json_path)
            ELSE (SELECT CASE WHEN sc.inner_path = '$' THEN st.text
                              ELSE json_extract(st.text, sc.inner_path) END
                    FROM shared_chunks sc JOIN v_shared_texts st ON st.text_id = sc.text_id
                   WHERE sc.fts_rowid = c.fts_rowid) END AS text
FROM chunks c JOIN entries e ON e.entry_rowid = c.entry_rowid
WHERE c.start = 0;

-- Unchanged but for `raw`, which is now the whole entry (v_entries).
DROP VIEW messages;
CREATE VIEW messages AS
SELECT m.*,
       (SELECT group_concat(t.text, char(10))
          FROM texts t
         WHERE t.entry_rowid = m.entry_rowid
           AND t.kind NOT IN ('thinking', 'tool_call')
           AND (t.json_path = '$.message.content' OR t.json_path LIKE '$.message.content[%'
                OR t.json_path IN ('$.message.command', '$.message.output'))) AS text,
       e.timestamp, e.parent_id, e.raw
FROM message_meta m JOIN v_entries e ON e.entry_rowid = m.entry_rowid;

-- Two entries are copies when their raw and the values cut out of it are
-- the same (raw alone no longer holds a tool's output).
DROP VIEW v_fork_copies;
CREATE VIEW v_fork_copies AS
SELECT e.entry_rowid, e.file_id, e.session_id, e.entry_id,
       p.file_id AS parent_file_id, p.entry_rowid AS parent_entry_rowid
FROM sessions c
JOIN entries e ON e.file_id = c.file_id
JOIN sessions ps ON ps.session_id = c.parent_session_id AND ps.file_id <> c.file_id
JOIN entries p ON p.file_id = ps.file_id AND p.entry_id = e.entry_id AND p.raw = e.raw
WHERE c.parent_session_id IS NOT NULL
  AND (SELECT group_concat(json_path || '|' || key || '|' || text_id, ',')
         FROM (SELECT * FROM shared_refs r WHERE r.entry_rowid = e.entry_rowid
                ORDER BY json_path, key)) IS
      (SELECT group_concat(json_path || '|' || key || '|' || text_id, ',')
         FROM (SELECT * FROM shared_refs r WHERE r.entry_rowid = p.entry_rowid
                ORDER BY json_path, key))
GROUP BY e.entry_rowid;

-- A tool call's arguments may hold shared values now (an assistant
-- message's large strings that are not conversation text go too).
DROP VIEW tool_calls;
CREATE VIEW tool_calls AS
SELECT t.file_id, t.session_id, t.entry_id, t.entry_rowid, t.json_path, t.block_index, t.call_id, t.name,
       json_extract(e.raw, t.json_path || '.arguments') AS arguments,
       t.timestamp_ms, t.result_entry_id, t.result_entry_rowid, t.result_timestamp_ms,
       t.is_error, t.result_len,
       t.result_timestamp_ms - t.timestamp_ms AS duration_ms
FROM tool_call_meta t JOIN v_entries e ON e.entry_rowid = t.entry_rowid;

-- Indexes no statement needs (EXPLAIN QUERY PLAN over every command's
-- statements, docs/performance.md): content_blocks was read by file only
-- to delete a file's rows, which now go by entry (the primary key's
-- prefix, through entries_file_entry); entries(file_id, pi_index) served
-- only v1 compactions' first kept entry, which entries_file_entry's range
-- of the file finds as well. 7 MB and 2 MB per GB of sessions.
DROP INDEX content_blocks_file;
DROP INDEX entries_file_pi_index;
