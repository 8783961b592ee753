-- piidx schema 21: the core views open in any SQLite again.
--
-- 0017 stores large shared texts deflated and read them back with
-- `sqlar_uncompress`, which the `sqlite3` shell and piidx have and Python's
-- `sqlite3`, Datasette without piidx's plugin, DBeaver and DuckDB do not:
-- `texts`, `messages`, `tool_calls` and `v_entries` failed there with "no
-- such function", breaking the promise that every documented view opens in
-- any SQLite 3.37 or later. They now read only what is stored as text, so
-- they open everywhere, and say where a value is deflated instead of
-- leaving it out unsaid:
--
-- * texts.text is NULL for a deflated text, and texts.deflated is 1;
-- * messages.text shows `[deflated: N bytes; messages_full has it]` in its
--   place; messages.complete is 0 then;
-- * v_entries.raw has every shared value stored as text put back and the
--   deflated ones left out (as in entries.raw); v_entries.complete says
--   whether it is the whole entry;
-- * tool_calls.arguments is read from that raw; tool_calls.complete, too.
--
-- The same views with every value inflated, as 0017 defined them, are
-- `texts_full`, `messages_full`, `tool_calls_full` and `v_entries_full`:
-- they need `sqlar_uncompress` (one line registers it: docs/schema.md).

-- The 0017/0018 definitions, under the names that say they inflate.
CREATE VIEW v_entries_full AS
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

CREATE VIEW texts_full AS
SELECT c.entry_rowid, c.file_id, e.session_id, e.entry_id, c.json_path, c.kind,
       c.tool_name, c.field_len AS text_len,
       CASE WHEN c.fts_rowid IS NULL THEN json_extract(e.raw, c.json_path)
            ELSE (SELECT CASE WHEN sc.inner_path = '$' THEN st.text
                              ELSE json_extract(st.text, sc.inner_path) END
                    FROM shared_chunks sc JOIN v_shared_texts st ON st.text_id = sc.text_id
                   WHERE sc.fts_rowid = c.fts_rowid) END AS text
FROM chunks c JOIN entries e ON e.entry_rowid = c.entry_rowid
WHERE c.start = 0;

CREATE VIEW messages_full AS
SELECT m.*,
       (SELECT group_concat(t.text, char(10))
          FROM texts_full t
         WHERE t.entry_rowid = m.entry_rowid
           AND t.kind NOT IN ('thinking', 'tool_call')
           AND (t.json_path = '$.message.content' OR t.json_path LIKE '$.message.content[%'
                OR t.json_path IN ('$.message.command', '$.message.output'))) AS text,
       e.timestamp, e.parent_id, e.raw
FROM message_meta m JOIN v_entries_full e ON e.entry_rowid = m.entry_rowid;

CREATE VIEW tool_calls_full AS
SELECT t.file_id, t.session_id, t.entry_id, t.entry_rowid, t.json_path, t.block_index, t.call_id, t.name,
       json_extract(e.raw, t.json_path || '.arguments') AS arguments,
       t.timestamp_ms, t.result_entry_id, t.result_entry_rowid, t.result_timestamp_ms,
       t.is_error, t.result_len,
       t.result_timestamp_ms - e.timestamp_ms AS duration_ms,
       e.timestamp_ms AS issued_ms,
       t.result_timestamp_ms - t.timestamp_ms AS turn_ms
FROM tool_call_meta t JOIN v_entries_full e ON e.entry_rowid = t.entry_rowid;

-- The core views, readable without the function. Dropped dependents first.
DROP VIEW tool_calls;
DROP VIEW messages;
DROP VIEW texts;
DROP VIEW v_entries;

CREATE VIEW v_entries AS
SELECT e.entry_rowid, e.file_id, e.session_id, e.entry_id, e.parent_id, e.type, e.timestamp,
       e.timestamp_ms, e.line_no,
       CASE WHEN NOT EXISTS (SELECT 1 FROM shared_refs r WHERE r.entry_rowid = e.entry_rowid)
            THEN e.raw
            ELSE (WITH RECURSIVE
                    refs(n, at, is_json, text) AS (
                      SELECT row_number() OVER (ORDER BY r.json_path, r.key_index),
                             r.json_path || '."' || r.key || '"', t.is_json, t.text
                        FROM shared_refs r JOIN shared_texts t ON t.text_id = r.text_id
                       WHERE r.entry_rowid = e.entry_rowid AND t.deflated IS NULL),
                    filled(n, json) AS (
                      SELECT 0, e.raw
                      UNION ALL
                      SELECT filled.n + 1,
                             json_set(filled.json, refs.at,
                                      CASE WHEN refs.is_json THEN json(refs.text) ELSE refs.text END)
                        FROM filled JOIN refs ON refs.n = filled.n + 1)
                  SELECT json FROM filled ORDER BY n DESC LIMIT 1)
       END AS raw,
       NOT EXISTS (SELECT 1 FROM shared_refs r JOIN shared_texts t ON t.text_id = r.text_id
                    WHERE r.entry_rowid = e.entry_rowid AND t.deflated IS NOT NULL) AS complete
FROM entries e;

CREATE VIEW texts AS
SELECT c.entry_rowid, c.file_id, e.session_id, e.entry_id, c.json_path, c.kind,
       c.tool_name, c.field_len AS text_len,
       CASE WHEN c.fts_rowid IS NULL THEN json_extract(e.raw, c.json_path)
            ELSE (SELECT CASE WHEN st.deflated IS NOT NULL THEN NULL
                              WHEN sc.inner_path = '$' THEN st.text
                              ELSE json_extract(st.text, sc.inner_path) END
                    FROM shared_chunks sc JOIN shared_texts st ON st.text_id = sc.text_id
                   WHERE sc.fts_rowid = c.fts_rowid) END AS text,
       coalesce((SELECT st.deflated IS NOT NULL
                   FROM shared_chunks sc JOIN shared_texts st ON st.text_id = sc.text_id
                  WHERE sc.fts_rowid = c.fts_rowid), 0) AS deflated
FROM chunks c JOIN entries e ON e.entry_rowid = c.entry_rowid
WHERE c.start = 0;

CREATE VIEW messages AS
SELECT m.*,
       (SELECT group_concat(coalesce(t.text,
                                     '[deflated: ' || t.text_len || ' bytes; messages_full has it]'),
                            char(10))
          FROM texts t
         WHERE t.entry_rowid = m.entry_rowid
           AND t.kind NOT IN ('thinking', 'tool_call')
           AND (t.json_path = '$.message.content' OR t.json_path LIKE '$.message.content[%'
                OR t.json_path IN ('$.message.command', '$.message.output'))) AS text,
       e.timestamp, e.parent_id, e.raw, e.complete
FROM message_meta m JOIN v_entries e ON e.entry_rowid = m.entry_rowid;

CREATE VIEW tool_calls AS
SELECT t.file_id, t.session_id, t.entry_id, t.entry_rowid, t.json_path, t.block_index, t.call_id, t.name,
       json_extract(e.raw, t.json_path || '.arguments') AS arguments,
       t.timestamp_ms, t.result_entry_id, t.result_entry_rowid, t.result_timestamp_ms,
       t.is_error, t.result_len,
       t.result_timestamp_ms - e.timestamp_ms AS duration_ms,
       e.timestamp_ms AS issued_ms,
       t.result_timestamp_ms - t.timestamp_ms AS turn_ms,
       e.complete
FROM tool_call_meta t JOIN v_entries e ON e.entry_rowid = t.entry_rowid;
