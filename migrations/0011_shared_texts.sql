-- piidx schema 11: text that many sessions share is stored and indexed once.
--
-- Every Pi 1.x session starts with a system message holding the whole
-- prompt (named sections, project context files) and every tool's schema:
-- 20-60 KB, mostly the same in every session. Its large values (each
-- section, a string content, the toolsAdded list; also in a compaction's
-- systemMessage checkpoint) leave entries.raw, like image payloads: each
-- distinct value is one row of shared_texts, an entry links to it by
-- shared_refs (the object it was cut from, its key and its place there),
-- and the full-text shards hold its words once (shared_chunks). A chunk of
-- an entry that lies in such a value points at that row (chunks.fts_rowid),
-- so every search filter still sees the entry, its session and its kind.
-- Parser version 4 makes the next sync re-index every file.

CREATE TABLE shared_texts(
  text_id INTEGER PRIMARY KEY,
  hash    TEXT NOT NULL UNIQUE, -- xxh3-128 of is_json || text, hex
  is_json INTEGER NOT NULL,     -- 1: `text` is a JSON value (a tool list); 0: the string itself
  text    TEXT NOT NULL
);

CREATE TABLE shared_refs(
  entry_rowid INTEGER NOT NULL,
  json_path   TEXT NOT NULL,    -- the object the value was cut from, e.g. $.message.sections
  key         TEXT NOT NULL,    -- its key there, e.g. preamble
  key_index   INTEGER NOT NULL, -- its position among that object's keys
  file_id     INTEGER NOT NULL,
  text_id     INTEGER NOT NULL,
  PRIMARY KEY(entry_rowid, json_path, key)
) WITHOUT ROWID;
CREATE INDEX shared_refs_file ON shared_refs(file_id);
CREATE INDEX shared_refs_text ON shared_refs(text_id);

-- The full-text documents of shared texts: row fts_rowid of the shards
-- (allocated from the chunk id sequence) is bytes start..start+len of the
-- string at inner_path ('$': the text itself) of text_id.
CREATE TABLE shared_chunks(
  fts_rowid  INTEGER PRIMARY KEY,
  text_id    INTEGER NOT NULL,
  inner_path TEXT NOT NULL,
  start      INTEGER NOT NULL,
  len        INTEGER NOT NULL
);
CREATE INDEX shared_chunks_text ON shared_chunks(text_id, inner_path, start);

-- NULL: the chunk is its own full-text row (rowid = chunk_id); else the
-- shared_chunks row holding its text.
ALTER TABLE chunks ADD COLUMN fts_rowid INTEGER;
CREATE INDEX chunks_fts_rowid ON chunks(fts_rowid) WHERE fts_rowid IS NOT NULL;

-- Every row the full-text shards must hold (shard = fts_rowid % shards):
-- the chunks that are their own row, and the rows of shared texts.
CREATE VIEW fts_rows(fts_rowid) AS
SELECT chunk_id FROM chunks WHERE fts_rowid IS NULL
UNION ALL
SELECT fts_rowid FROM shared_chunks;

-- The value a shared reference stands for, as text (a JSON value as JSON).
CREATE VIEW v_shared_values AS
SELECT r.entry_rowid, r.file_id, r.json_path, r.key, r.key_index, t.is_json, t.text
FROM shared_refs r JOIN shared_texts t ON t.text_id = r.text_id;

-- Views that read a chunk's field: from entries.raw, or from the shared
-- text it points at.
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
                          FROM shared_chunks sc JOIN shared_texts st ON st.text_id = sc.text_id
                         WHERE sc.fts_rowid = c.fts_rowid) END AS text
        FROM chunks c JOIN entries e ON e.entry_rowid = c.entry_rowid);

DROP VIEW texts;
CREATE VIEW texts AS
SELECT c.entry_rowid, c.file_id, e.session_id, e.entry_id, c.json_path, c.kind,
       c.tool_name, c.field_len AS text_len,
       CASE WHEN c.fts_rowid IS NULL THEN json_extract(e.raw, c.json_path)
            ELSE (SELECT CASE WHEN sc.inner_path = '$' THEN st.text
                              ELSE json_extract(st.text, sc.inner_path) END
                    FROM shared_chunks sc JOIN shared_texts st ON st.text_id = sc.text_id
                   WHERE sc.fts_rowid = c.fts_rowid) END AS text
FROM chunks c JOIN entries e ON e.entry_rowid = c.entry_rowid
WHERE c.start = 0;

-- A message's text: its content (and a bash command and output), the
-- texts Pi shows; not thinking, tool-call arguments, tool details or
-- fields piidx does not know.
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
FROM message_meta m JOIN entries e ON e.entry_rowid = m.entry_rowid;
