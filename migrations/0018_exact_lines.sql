-- piidx schema 18: export gives back every line the index recovered, and a
-- tool's duration is the tool's.
--
-- exact_lines: the bytes of a line whose objects, written back out, are
-- not the line: two objects glued with something between them, a `\r`
-- before the `\n`, a lone UTF-16 surrogate escape (read as U+FFFD, so raw
-- holds U+FFFD), invalid UTF-8, or space around the object. A line Pi wrote
-- and that parsed as one object has no row: its raw, with what was cut out
-- of it put back, is the line. An index that redacts keeps no rows here.
-- `header` is 1 for the line that holds the session header (and entries
-- glued to it, if any). Parser version 7 makes the next sync re-read every
-- file, which fills it.
CREATE TABLE exact_lines(
  file_id     INTEGER NOT NULL REFERENCES files(file_id),
  byte_offset INTEGER NOT NULL,
  header      INTEGER NOT NULL DEFAULT 0,
  bytes       BLOB NOT NULL,
  PRIMARY KEY (file_id, byte_offset)
) WITHOUT ROWID;

-- A tool call is issued when the assistant message that holds it ends: Pi
-- writes the entry then, with that time as the entry's `timestamp`, while
-- the message's own `timestamp` is when the request started. duration_ms
-- is now from the entry's timestamp (issued_ms) to the result; turn_ms is
-- the old figure, from the request's start (the model's generation time
-- included). NULL when a time is missing.
DROP VIEW v_tool_calls_dedup;
CREATE VIEW v_tool_calls_dedup AS
SELECT file_id, session_id, entry_id, entry_rowid, call_id, name, timestamp_ms,
       result_entry_id, result_timestamp_ms, is_error, result_len, duration_ms, project_dir,
       issued_ms, turn_ms
FROM (
  SELECT t.file_id, t.session_id, t.entry_id, t.entry_rowid, t.call_id, t.name, t.timestamp_ms,
         t.result_entry_id, t.result_timestamp_ms, t.is_error, t.result_len,
         t.result_timestamp_ms - e.timestamp_ms AS duration_ms,
         s.project_dir,
         e.timestamp_ms AS issued_ms,
         t.result_timestamp_ms - t.timestamp_ms AS turn_ms,
         t.copies
  FROM tool_call_meta t
  LEFT JOIN sessions s ON s.file_id = t.file_id
  LEFT JOIN entries e ON e.entry_rowid = t.entry_rowid
)
WHERE copies > 0;

DROP VIEW tool_calls;
CREATE VIEW tool_calls AS
SELECT t.file_id, t.session_id, t.entry_id, t.entry_rowid, t.json_path, t.block_index, t.call_id, t.name,
       json_extract(e.raw, t.json_path || '.arguments') AS arguments,
       t.timestamp_ms, t.result_entry_id, t.result_entry_rowid, t.result_timestamp_ms,
       t.is_error, t.result_len,
       t.result_timestamp_ms - e.timestamp_ms AS duration_ms,
       e.timestamp_ms AS issued_ms,
       t.result_timestamp_ms - t.timestamp_ms AS turn_ms
FROM tool_call_meta t JOIN v_entries e ON e.entry_rowid = t.entry_rowid;
