-- piidx schema 27: a message's text computed once per row of `v_message_text`.
--
-- The view kept a message when its text was not empty (`WHERE text <> ''`
-- over a subquery that SQLite flattens), so each row it gave computed the
-- text twice: the JSON of the entry read, parsed and the text copied out,
-- then joined, once for the test and once for the column. A 100 MB user
-- message held about 1.9 GB while `sync` gave it to `message_fts`. The test
-- now asks `chunks`: a message has text exactly when it has a first chunk
-- of a text block (sync makes chunks of non-blank strings only). The rows
-- and the text are those of the old view, so `message_fts`, an index of
-- this view, stays as it is.
DROP VIEW v_message_text;
CREATE VIEW v_message_text AS
SELECT m.entry_rowid, m.file_id, m.session_id, m.entry_id, m.role,
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
 WHERE m.role IN ('user', 'assistant')
   AND EXISTS (SELECT 1 FROM chunks c
                WHERE c.entry_rowid = m.entry_rowid AND c.start = 0 AND c.fts_rowid IS NULL
                  AND c.kind IN ('user', 'assistant')
                  AND (c.json_path = '$.message.content' OR c.json_path LIKE '$.message.content[%'));
