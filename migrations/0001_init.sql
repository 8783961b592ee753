-- piidx schema 1: files, sessions, the entry tree, messages, blocks, tool calls,
-- usage, parse errors, and the FTS5 index.
--
-- Design rules (see docs/schema.md):
-- * Text is stored exactly once, inside entries.raw (the entry as Pi wrote it,
--   minus base64 image payloads, which live decoded in blobs). Every other
--   text column is a view column computed with json_extract from raw.
-- * FTS documents are byte spans (chunks) of one JSON string field of one
--   entry; fts_content turns a chunk back into its text for snippet() and for
--   FTS5's own deletes.
-- * No REFERENCES clauses: the bundled SQLite enforces foreign keys, and the
--   writer deletes a file's rows itself, child tables first.
-- * Nothing here uses syntax newer than SQLite 3.40, so the Debian sqlite3
--   CLI can open the database.

PRAGMA application_id = 1885956472; -- 0x70696978, "piix"

CREATE TABLE meta(
  key   TEXT PRIMARY KEY,
  value TEXT
) WITHOUT ROWID;

CREATE TABLE files(
  file_id        INTEGER PRIMARY KEY,
  path           TEXT NOT NULL UNIQUE,
  root           TEXT NOT NULL,
  rel_path       TEXT NOT NULL,
  depth          INTEGER NOT NULL,
  status         TEXT NOT NULL,
  skip_reason    TEXT,
  dev            INTEGER,
  ino            INTEGER,
  size           INTEGER NOT NULL DEFAULT 0,
  mtime_ns       INTEGER,
  seen_ns        INTEGER,
  offset         INTEGER NOT NULL DEFAULT 0,
  line_count     INTEGER NOT NULL DEFAULT 0,
  object_count   INTEGER NOT NULL DEFAULT 0,
  tail_open      INTEGER NOT NULL DEFAULT 0,
  last_entry_id  TEXT,
  head_len       INTEGER NOT NULL DEFAULT 0,
  head_hash      INTEGER,
  anchor_hash    INTEGER,
  parser_version INTEGER NOT NULL,
  indexed_at     TEXT,
  deleted_at     TEXT
);

CREATE TABLE sessions(
  file_id           INTEGER PRIMARY KEY,
  session_id        TEXT NOT NULL,
  file_path         TEXT NOT NULL,
  cwd               TEXT NOT NULL,
  project_dir       TEXT,
  version           INTEGER NOT NULL,
  created_at        TEXT,
  created_ms        INTEGER,
  parent_session    TEXT,
  parent_session_id TEXT,
  name              TEXT,
  first_message     TEXT,
  message_count     INTEGER NOT NULL DEFAULT 0,
  entry_count       INTEGER NOT NULL DEFAULT 0,
  activity_ms       INTEGER,
  modified_ms       INTEGER,
  leaf_entry_id     TEXT,
  listed_by_pi      INTEGER NOT NULL,
  header_raw        TEXT NOT NULL
);
CREATE INDEX sessions_session_id ON sessions(session_id);
CREATE INDEX sessions_file_path ON sessions(file_path);
CREATE INDEX sessions_parent ON sessions(parent_session);
CREATE INDEX sessions_modified ON sessions(modified_ms);

CREATE TABLE entries(
  entry_rowid  INTEGER PRIMARY KEY,
  file_id      INTEGER NOT NULL,
  session_id   TEXT NOT NULL,
  entry_id     TEXT NOT NULL,
  parent_id    TEXT,
  type         TEXT NOT NULL,
  timestamp    TEXT,
  timestamp_ms INTEGER,
  line_no      INTEGER NOT NULL,
  byte_offset  INTEGER NOT NULL,
  byte_len     INTEGER NOT NULL,
  obj_in_line  INTEGER NOT NULL,
  pi_index     INTEGER,
  synthetic_id INTEGER NOT NULL,
  glued        INTEGER NOT NULL,
  raw          TEXT NOT NULL,
  UNIQUE(file_id, byte_offset, obj_in_line)
);
CREATE INDEX entries_file_entry ON entries(file_id, entry_id);
CREATE INDEX entries_file_pi_index ON entries(file_id, pi_index);

CREATE TABLE message_meta(
  entry_rowid        INTEGER PRIMARY KEY,
  file_id            INTEGER NOT NULL,
  session_id         TEXT NOT NULL,
  entry_id           TEXT NOT NULL,
  role               TEXT NOT NULL,
  timestamp_ms       INTEGER,
  provider           TEXT,
  model              TEXT,
  api                TEXT,
  stop_reason        TEXT,
  error_message      TEXT,
  response_id        TEXT,
  input_tokens       INTEGER,
  output_tokens      INTEGER,
  cache_read_tokens  INTEGER,
  cache_write_tokens INTEGER,
  total_tokens       INTEGER,
  cost_total         REAL,
  tool_call_id       TEXT,
  tool_name          TEXT,
  is_error           INTEGER,
  exit_code          INTEGER,
  custom_type        TEXT,
  text_len           INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX message_meta_file ON message_meta(file_id);
CREATE INDEX message_meta_role ON message_meta(role, timestamp_ms);

CREATE TABLE content_blocks(
  entry_rowid   INTEGER NOT NULL,
  json_path     TEXT NOT NULL,
  block_index   INTEGER NOT NULL,
  file_id       INTEGER NOT NULL,
  type          TEXT NOT NULL,
  text_len      INTEGER,
  redacted      INTEGER,
  tool_call_id  TEXT,
  image_hash    TEXT,
  PRIMARY KEY(entry_rowid, json_path)
) WITHOUT ROWID;
CREATE INDEX content_blocks_file ON content_blocks(file_id);

CREATE TABLE tool_call_meta(
  entry_rowid         INTEGER NOT NULL,
  json_path           TEXT NOT NULL,
  block_index         INTEGER NOT NULL,
  file_id             INTEGER NOT NULL,
  session_id          TEXT NOT NULL,
  entry_id            TEXT NOT NULL,
  call_id             TEXT,
  name                TEXT,
  timestamp_ms        INTEGER,
  result_entry_rowid  INTEGER,
  result_entry_id     TEXT,
  result_timestamp_ms INTEGER,
  is_error            INTEGER,
  result_len          INTEGER,
  PRIMARY KEY(entry_rowid, json_path)
) WITHOUT ROWID;
CREATE INDEX tool_call_meta_call ON tool_call_meta(file_id, call_id);
CREATE INDEX tool_call_meta_name ON tool_call_meta(name);

CREATE TABLE usage_records(
  entry_rowid        INTEGER NOT NULL,
  source             TEXT NOT NULL,
  file_id            INTEGER NOT NULL,
  session_id         TEXT NOT NULL,
  entry_id           TEXT NOT NULL,
  timestamp_ms       INTEGER,
  provider           TEXT,
  model              TEXT,
  response_id        TEXT,
  input_tokens       INTEGER NOT NULL,
  output_tokens      INTEGER NOT NULL,
  cache_read_tokens  INTEGER NOT NULL,
  cache_write_tokens INTEGER NOT NULL,
  total_tokens       INTEGER NOT NULL,
  cost_input         REAL,
  cost_output        REAL,
  cost_cache_read    REAL,
  cost_cache_write   REAL,
  cost_total         REAL,
  PRIMARY KEY(entry_rowid, source)
) WITHOUT ROWID;
CREATE INDEX usage_records_file ON usage_records(file_id);
CREATE INDEX usage_records_time ON usage_records(timestamp_ms);

CREATE TABLE compactions(
  entry_rowid           INTEGER PRIMARY KEY,
  file_id               INTEGER NOT NULL,
  session_id            TEXT NOT NULL,
  entry_id              TEXT NOT NULL,
  first_kept_entry_id   TEXT,
  first_kept_entry_index INTEGER,
  tokens_before         INTEGER,
  from_hook             INTEGER
);
CREATE INDEX compactions_file ON compactions(file_id);

CREATE TABLE branch_summaries(
  entry_rowid INTEGER PRIMARY KEY,
  file_id     INTEGER NOT NULL,
  session_id  TEXT NOT NULL,
  entry_id    TEXT NOT NULL,
  from_id     TEXT,
  from_hook   INTEGER
);
CREATE INDEX branch_summaries_file ON branch_summaries(file_id);

CREATE TABLE labels(
  entry_rowid INTEGER PRIMARY KEY,
  file_id     INTEGER NOT NULL,
  session_id  TEXT NOT NULL,
  entry_id    TEXT NOT NULL,
  target_id   TEXT,
  label       TEXT
);
CREATE INDEX labels_file ON labels(file_id);

CREATE TABLE model_changes(
  entry_rowid INTEGER PRIMARY KEY,
  file_id     INTEGER NOT NULL,
  session_id  TEXT NOT NULL,
  entry_id    TEXT NOT NULL,
  kind        TEXT NOT NULL,
  provider    TEXT,
  model_id    TEXT,
  thinking_level TEXT
);
CREATE INDEX model_changes_file ON model_changes(file_id);

CREATE TABLE images(
  entry_rowid INTEGER NOT NULL,
  json_path   TEXT NOT NULL,
  file_id     INTEGER NOT NULL,
  payload_key TEXT NOT NULL,
  mime_type   TEXT,
  byte_len    INTEGER NOT NULL,
  hash        TEXT NOT NULL,
  PRIMARY KEY(entry_rowid, json_path)
) WITHOUT ROWID;
CREATE INDEX images_file ON images(file_id);
CREATE INDEX images_hash ON images(hash);

CREATE TABLE blobs(
  hash     TEXT PRIMARY KEY,
  encoding TEXT NOT NULL,
  data     BLOB NOT NULL
);

CREATE TABLE chunks(
  chunk_id    INTEGER PRIMARY KEY,
  entry_rowid INTEGER NOT NULL,
  file_id     INTEGER NOT NULL,
  json_path   TEXT NOT NULL,
  start       INTEGER NOT NULL,
  len         INTEGER NOT NULL,
  field_len   INTEGER NOT NULL,
  kind        TEXT NOT NULL,
  tool_name   TEXT
);
CREATE INDEX chunks_entry ON chunks(entry_rowid);
CREATE INDEX chunks_file ON chunks(file_id);

CREATE TABLE parse_errors(
  file_id     INTEGER NOT NULL,
  file_path   TEXT NOT NULL,
  line_no     INTEGER NOT NULL,
  byte_offset INTEGER NOT NULL,
  byte_len    INTEGER NOT NULL,
  reason      TEXT NOT NULL,
  excerpt     TEXT
);
CREATE INDEX parse_errors_file ON parse_errors(file_id);

-- The text of one chunk. Spans are byte offsets into the UTF-8 string at
-- json_path, always cut on character boundaries by the writer.
CREATE VIEW fts_content(chunk_id, body) AS
SELECT c.chunk_id,
       CASE WHEN c.start = 0 AND c.len = c.field_len
            THEN json_extract(e.raw, c.json_path)
            ELSE CAST(substr(CAST(json_extract(e.raw, c.json_path) AS BLOB), c.start + 1, c.len) AS TEXT)
       END
FROM chunks c JOIN entries e ON e.entry_rowid = c.entry_rowid;

CREATE VIRTUAL TABLE fts USING fts5(
  body,
  content = 'fts_content',
  content_rowid = 'chunk_id',
  tokenize = 'unicode61 remove_diacritics 2'
);
-- FTS5 writes its in-memory buffer as a new segment whenever it exceeds
-- `hashsize` (default 1 MB), and then spends its time merging those small
-- segments. A commit is ~32 MB of input: buffer it whole.
INSERT INTO fts(fts, rank) VALUES ('hashsize', 67108864);

-- Full text of one indexed field (all chunks of it).
CREATE VIEW texts AS
SELECT c.entry_rowid, c.file_id, e.session_id, e.entry_id, c.json_path, c.kind,
       c.tool_name, c.field_len AS text_len,
       json_extract(e.raw, c.json_path) AS text
FROM chunks c JOIN entries e ON e.entry_rowid = c.entry_rowid
WHERE c.start = 0;

CREATE VIEW messages AS
SELECT m.*,
       (SELECT group_concat(json_extract(e.raw, c.json_path), char(10))
          FROM chunks c
         WHERE c.entry_rowid = m.entry_rowid AND c.start = 0
           AND c.kind NOT IN ('thinking', 'tool_call')) AS text,
       e.timestamp, e.parent_id, e.raw
FROM message_meta m JOIN entries e ON e.entry_rowid = m.entry_rowid;

CREATE VIEW tool_calls AS
SELECT t.file_id, t.session_id, t.entry_id, t.entry_rowid, t.json_path, t.block_index, t.call_id, t.name,
       json_extract(e.raw, t.json_path || '.arguments') AS arguments,
       t.timestamp_ms, t.result_entry_id, t.result_entry_rowid, t.result_timestamp_ms,
       t.is_error, t.result_len,
       t.result_timestamp_ms - t.timestamp_ms AS duration_ms
FROM tool_call_meta t JOIN entries e ON e.entry_rowid = t.entry_rowid;

CREATE VIEW v_session_summary AS
SELECT s.session_id, s.file_path, s.cwd, s.name, s.first_message, s.message_count,
       s.entry_count,
       strftime('%Y-%m-%dT%H:%M:%fZ', s.created_ms / 1000.0, 'unixepoch') AS created,
       strftime('%Y-%m-%dT%H:%M:%fZ', s.modified_ms / 1000.0, 'unixepoch') AS modified,
       s.parent_session, s.parent_session_id, s.leaf_entry_id,
       (SELECT count(*) FROM message_meta m WHERE m.file_id = s.file_id AND m.role = 'user') AS user_messages,
       (SELECT count(*) FROM message_meta m WHERE m.file_id = s.file_id AND m.role = 'assistant') AS assistant_messages,
       (SELECT count(*) FROM tool_call_meta t WHERE t.file_id = s.file_id) AS tool_calls,
       (SELECT coalesce(sum(u.total_tokens), 0) FROM usage_records u WHERE u.file_id = s.file_id) AS total_tokens,
       (SELECT coalesce(sum(u.cost_total), 0) FROM usage_records u WHERE u.file_id = s.file_id) AS cost_total
FROM sessions s;

CREATE VIEW v_daily_usage AS
SELECT date(u.timestamp_ms / 1000, 'unixepoch') AS day,
       u.provider, u.model,
       count(*) AS records,
       sum(u.input_tokens) AS input_tokens,
       sum(u.output_tokens) AS output_tokens,
       sum(u.cache_read_tokens) AS cache_read_tokens,
       sum(u.cache_write_tokens) AS cache_write_tokens,
       sum(u.total_tokens) AS total_tokens,
       sum(u.cost_total) AS cost_total
FROM usage_records u
GROUP BY day, u.provider, u.model;

CREATE VIEW v_parse_errors AS
SELECT p.file_path, p.line_no, p.byte_offset, p.byte_len, p.reason, p.excerpt
FROM parse_errors p;
