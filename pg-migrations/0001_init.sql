-- piidx team store, schema 1 (docs/postgres.md). Every row belongs to one
-- pushing index (`src`, a row of `machines`): a push only ever touches its
-- own rows, so pushes of different machines never wait for each other.
-- Keys are the index's own surrogate keys, unique per `src`.

CREATE TABLE machines(
  src        integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  uid        text NOT NULL UNIQUE,      -- meta.machine_uid of the index
  name       text NOT NULL,             -- the index's label (host name by default)
  first_push timestamptz NOT NULL DEFAULT now(),
  last_push  timestamptz
);

-- The push cursor: what the store holds of each file, by signature, and
-- up to which entry. It is written in the transaction that writes the
-- file's rows.
CREATE TABLE push_files(
  src     integer NOT NULL REFERENCES machines,
  file_id bigint NOT NULL,
  sig     text NOT NULL,
  base    text NOT NULL,                -- what stays while the file only grows
  max_rowid bigint NOT NULL,            -- the highest entry_rowid sent
  entries bigint NOT NULL,              -- the file's entries then
  pushed_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (src, file_id)
);

CREATE TABLE files(
  src integer NOT NULL, file_id bigint NOT NULL,
  machine text NOT NULL,                -- the label of the machine the file comes from
  path text NOT NULL, root text, rel_path text, depth bigint, layout text,
  size bigint, mtime_ns bigint, byte_offset bigint, line_count bigint,
  parser_version bigint,
  PRIMARY KEY (src, file_id)
);

CREATE TABLE sessions(
  src integer NOT NULL, file_id bigint NOT NULL, machine text NOT NULL,
  session_id text, file_path text, cwd text, project_dir text, version bigint,
  created_at text, created_ms bigint, parent_session text, parent_session_id text,
  name text, first_message text, message_count bigint, entry_count bigint,
  activity_ms bigint, modified_ms bigint, leaf_entry_id text, listed_by_pi bigint,
  header_raw text,
  PRIMARY KEY (src, file_id)
);
CREATE INDEX sessions_id ON sessions(session_id);
CREATE INDEX sessions_modified ON sessions(modified_ms);

CREATE TABLE entries(
  src integer NOT NULL, entry_rowid bigint NOT NULL, file_id bigint NOT NULL,
  session_id text, entry_id text, parent_id text, type text, timestamp_ms bigint,
  line_no bigint, byte_offset bigint, byte_len bigint, obj_in_line bigint, pi_index bigint,
  PRIMARY KEY (src, entry_rowid)
);
CREATE INDEX entries_file ON entries(src, file_id);

CREATE TABLE message_meta(
  src integer NOT NULL, entry_rowid bigint NOT NULL, file_id bigint NOT NULL,
  session_id text, entry_id text, role text, timestamp_ms bigint, provider text,
  model text, api text, stop_reason text, error_message text, response_id text,
  input_tokens bigint, output_tokens bigint, cache_read_tokens bigint,
  cache_write_tokens bigint, total_tokens bigint, cost_total double precision,
  tool_call_id text, tool_name text, is_error bigint, exit_code bigint,
  custom_type text, text_len bigint,
  PRIMARY KEY (src, entry_rowid)
);
CREATE INDEX message_meta_file ON message_meta(src, file_id);

-- Every text piidx searches (SQLite's `chunks` and their bodies,
-- `fts_content`): messages, thinking, tool calls and results, bash output,
-- summaries, custom messages... one row per chunk of at most 32 KiB, as the
-- index's full-text shards hold them, with what the search filters read:
-- the entry's type, the message's role and model, the chunk's kind and
-- tool. `tsv` is its word index ('simple': lower case, no stemming, as
-- SQLite's unicode61).
CREATE TABLE texts(
  src integer NOT NULL, chunk_id bigint NOT NULL, entry_rowid bigint NOT NULL,
  file_id bigint NOT NULL, session_id text, entry_id text, line_no bigint,
  entry_type text, message_role text, kind text NOT NULL, tool_name text,
  json_path text NOT NULL, start bigint NOT NULL, timestamp_ms bigint, model text,
  text text NOT NULL,
  tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED,
  PRIMARY KEY (src, chunk_id)
);
CREATE INDEX texts_file ON texts(src, file_id);
CREATE INDEX texts_tsv ON texts USING gin (tsv);

CREATE TABLE tool_call_meta(
  src integer NOT NULL, entry_rowid bigint NOT NULL, json_path text NOT NULL,
  block_index bigint, file_id bigint NOT NULL, session_id text, entry_id text,
  call_id text, name text, timestamp_ms bigint, result_entry_rowid bigint,
  result_entry_id text, result_timestamp_ms bigint, is_error bigint, result_len bigint,
  copies bigint,
  PRIMARY KEY (src, entry_rowid, json_path)
);
CREATE INDEX tool_call_meta_file ON tool_call_meta(src, file_id);
CREATE INDEX tool_call_meta_name ON tool_call_meta(name);

CREATE TABLE usage_records(
  src integer NOT NULL, entry_rowid bigint NOT NULL, source text NOT NULL,
  file_id bigint NOT NULL, session_id text, entry_id text, timestamp_ms bigint,
  provider text, model text, response_id text, input_tokens bigint,
  output_tokens bigint, cache_read_tokens bigint, cache_write_tokens bigint,
  total_tokens bigint, cost_input double precision, cost_output double precision,
  cost_cache_read double precision, cost_cache_write double precision,
  cost_total double precision, dedupe_key text, copies bigint,
  reasoning_tokens bigint, cache_write_1h_tokens bigint, cost_from_provider bigint,
  PRIMARY KEY (src, entry_rowid, source)
);
CREATE INDEX usage_records_file ON usage_records(src, file_id);
CREATE INDEX usage_records_time ON usage_records(timestamp_ms);

CREATE TABLE subagent_runs(
  src integer NOT NULL, run_rowid bigint NOT NULL, entry_rowid bigint,
  file_id bigint NOT NULL, session_id text, entry_id text, tool_call_id text,
  tool_name text, timestamp_ms bigint, json_path text, mode text, position bigint,
  run_index bigint, step bigint, agent text, agent_source text, task text,
  exit_code bigint, status text, error text, stop_reason text, model text,
  input_tokens bigint, output_tokens bigint, cache_read_tokens bigint,
  cache_write_tokens bigint, cost double precision, turns bigint,
  context_tokens bigint, tool_count bigint, progress_tokens bigint,
  duration_ms bigint, message_count bigint, session_file text,
  child_file_id bigint, child_session_id text, run_id text, termination_signal text,
  PRIMARY KEY (src, run_rowid)
);
CREATE INDEX subagent_runs_file ON subagent_runs(src, file_id);
CREATE INDEX subagent_runs_child ON subagent_runs(src, child_file_id);

-- Usage counted once per fork copy within one machine (SQLite's
-- `v_usage_records`), with the session's machine, cwd and project.
CREATE VIEW v_usage_records AS
SELECT u.*, CASE WHEN u.total_tokens > 0 AND coalesce(u.cost_total, 0) = 0 THEN 1 ELSE 0 END
         AS unpriced,
       s.machine, s.project_dir, s.cwd, s.file_path
  FROM usage_records u LEFT JOIN sessions s ON s.src = u.src AND s.file_id = u.file_id
 WHERE u.copies > 0;
