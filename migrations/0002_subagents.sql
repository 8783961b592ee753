-- Subagent runs, their child transcripts, artifact files and child sessions.
-- See docs/schema.md "Subagents".

-- One row per `details.results[position]` of a subagent toolResult.
CREATE TABLE subagent_runs(
  run_rowid                INTEGER PRIMARY KEY,
  entry_rowid              INTEGER NOT NULL,
  file_id                  INTEGER NOT NULL,
  session_id               TEXT NOT NULL,
  entry_id                 TEXT NOT NULL,
  tool_call_id             TEXT,
  tool_name                TEXT,
  timestamp_ms             INTEGER,
  json_path                TEXT NOT NULL,
  mode                     TEXT,
  position                 INTEGER NOT NULL,
  run_index                INTEGER,
  step                     INTEGER,
  agent                    TEXT,
  agent_source             TEXT,
  task                     TEXT,
  exit_code                INTEGER,
  status                   TEXT NOT NULL,
  error                    TEXT,
  stop_reason              TEXT,
  model                    TEXT,
  input_tokens             INTEGER,
  output_tokens            INTEGER,
  cache_read_tokens        INTEGER,
  cache_write_tokens       INTEGER,
  cost                     REAL,
  turns                    INTEGER,
  context_tokens           INTEGER,
  tool_count               INTEGER,
  progress_tokens          INTEGER,
  duration_ms              INTEGER,
  message_count            INTEGER NOT NULL DEFAULT 0,
  session_file             TEXT,
  artifact_input_path      TEXT,
  artifact_output_path     TEXT,
  artifact_jsonl_path      TEXT,
  artifact_meta_path       TEXT,
  artifact_transcript_path TEXT,
  artifact_base            TEXT,
  child_location           TEXT,
  run_id                   TEXT,
  async_id                 TEXT,
  child_file_id            INTEGER,
  child_session_id         TEXT,
  UNIQUE(entry_rowid, position)
);
CREATE INDEX subagent_runs_file ON subagent_runs(file_id);
CREATE INDEX subagent_runs_session ON subagent_runs(session_id);
CREATE INDEX subagent_runs_session_file ON subagent_runs(session_file);
CREATE INDEX subagent_runs_base ON subagent_runs(artifact_base);
CREATE INDEX subagent_runs_child ON subagent_runs(child_file_id);

-- Child transcript messages (`details.results[i].messages[position]`).
CREATE TABLE subagent_messages(
  run_rowid          INTEGER NOT NULL,
  position           INTEGER NOT NULL,
  file_id            INTEGER NOT NULL,
  json_path          TEXT NOT NULL,
  role               TEXT NOT NULL,
  timestamp_ms       INTEGER,
  provider           TEXT,
  model              TEXT,
  stop_reason        TEXT,
  error_message      TEXT,
  input_tokens       INTEGER,
  output_tokens      INTEGER,
  cache_read_tokens  INTEGER,
  cache_write_tokens INTEGER,
  total_tokens       INTEGER,
  cost_total         REAL,
  tool_call_id       TEXT,
  tool_name          TEXT,
  is_error           INTEGER,
  text_len           INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY(run_rowid, position)
) WITHOUT ROWID;
CREATE INDEX subagent_messages_file ON subagent_messages(file_id);

-- toolCall blocks of child assistant messages, joined to their child result.
CREATE TABLE subagent_tool_calls(
  run_rowid        INTEGER NOT NULL,
  json_path        TEXT NOT NULL,
  message_position INTEGER NOT NULL,
  block_index      INTEGER NOT NULL,
  file_id          INTEGER NOT NULL,
  call_id          TEXT,
  name             TEXT,
  result_position  INTEGER,
  is_error         INTEGER,
  PRIMARY KEY(run_rowid, json_path)
) WITHOUT ROWID;
CREATE INDEX subagent_tool_calls_file ON subagent_tool_calls(file_id);

-- Which run a search chunk (in `chunks`/`fts`) belongs to.
CREATE TABLE chunk_runs(
  chunk_id         INTEGER PRIMARY KEY,
  run_rowid        INTEGER NOT NULL,
  file_id          INTEGER NOT NULL,
  message_position INTEGER
);
CREATE INDEX chunk_runs_run ON chunk_runs(run_rowid);
CREATE INDEX chunk_runs_file ON chunk_runs(file_id);

-- Files under `<root>/<dir>/subagent-artifacts/` (never sessions).
CREATE TABLE subagent_artifacts(
  artifact_id INTEGER PRIMARY KEY,
  path        TEXT NOT NULL UNIQUE,
  root        TEXT NOT NULL,
  project_dir TEXT,
  name        TEXT NOT NULL,
  base        TEXT,
  kind        TEXT NOT NULL,
  run_id      TEXT,
  agent       TEXT,
  size        INTEGER NOT NULL,
  mtime_ns    INTEGER NOT NULL,
  text        TEXT,
  meta_json   TEXT,
  note        TEXT,
  run_rowid   INTEGER,
  indexed_at  TEXT
);
CREATE INDEX subagent_artifacts_base ON subagent_artifacts(project_dir, base);
CREATE INDEX subagent_artifacts_run ON subagent_artifacts(run_rowid);

-- Full-text index over `_output.md` artifact text.
CREATE VIRTUAL TABLE artifact_fts USING fts5(
  text,
  content = 'subagent_artifacts',
  content_rowid = 'artifact_id',
  tokenize = 'unicode61 remove_diacritics 2'
);

-- Runs with their parent session and artifact state.
CREATE VIEW v_subagent_runs AS
SELECT r.*,
       s.file_path AS parent_file_path,
       s.name AS parent_session_name,
       s.cwd AS parent_cwd,
       (SELECT count(*) FROM subagent_artifacts a WHERE a.run_rowid = r.run_rowid) AS artifacts_found,
       (SELECT (r.artifact_input_path IS NOT NULL AND NOT EXISTS
                 (SELECT 1 FROM subagent_artifacts a WHERE a.run_rowid = r.run_rowid AND a.kind = 'input'))
             + (r.artifact_output_path IS NOT NULL AND NOT EXISTS
                 (SELECT 1 FROM subagent_artifacts a WHERE a.run_rowid = r.run_rowid AND a.kind = 'output'))
             + (r.artifact_jsonl_path IS NOT NULL AND NOT EXISTS
                 (SELECT 1 FROM subagent_artifacts a WHERE a.run_rowid = r.run_rowid
                     AND a.kind IN ('event_stream', 'jsonl')))
             + (r.artifact_meta_path IS NOT NULL AND NOT EXISTS
                 (SELECT 1 FROM subagent_artifacts a WHERE a.run_rowid = r.run_rowid AND a.kind = 'meta'))
             + (r.artifact_transcript_path IS NOT NULL AND NOT EXISTS
                 (SELECT 1 FROM subagent_artifacts a WHERE a.run_rowid = r.run_rowid AND a.kind = 'transcript'))
       ) AS artifacts_missing,
       (r.session_file IS NOT NULL AND r.child_file_id IS NULL) AS session_file_missing
FROM subagent_runs r LEFT JOIN sessions s ON s.file_id = r.file_id;

-- The top-level `messages` view, without child-transcript text (which is
-- indexed on the same parent entry; see `chunk_runs`).
DROP VIEW messages;
CREATE VIEW messages AS
SELECT m.*,
       (SELECT group_concat(json_extract(e.raw, c.json_path), char(10))
          FROM chunks c
         WHERE c.entry_rowid = m.entry_rowid AND c.start = 0
           AND c.kind NOT IN ('thinking', 'tool_call')
           AND c.json_path NOT LIKE '$.message.details.%') AS text,
       e.timestamp, e.parent_id, e.raw
FROM message_meta m JOIN entries e ON e.entry_rowid = m.entry_rowid;
