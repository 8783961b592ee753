-- piidx schema 9: fork copies are folded once, at sync time.
--
-- v_usage_records and v_tool_calls_dedup chose the kept copy of each usage
-- record and tool call with window functions over the whole table, at every
-- query: 0.3-0.7 s on a 1 GB corpus for `piidx usage` and `piidx tools`.
-- The choice now lives in a column, `copies`, that sync keeps current for
-- the keys each commit touches (src/store/copies.rs); piidx fills it for the
-- existing rows right after this file, in the same transaction. The rule is
-- the old one, with one change: between two copies in sessions created at
-- the same time, the first file by path wins, not the lowest file_id, so a
-- fresh sync and any sequence of syncs keep the same row.

-- The dedupe key of 0004, now a column so that it can be indexed.
ALTER TABLE usage_records ADD COLUMN dedupe_key TEXT GENERATED ALWAYS AS (
  CASE WHEN response_id IS NOT NULL AND response_id <> ''
       THEN 'r|' || source || '|' || response_id
       ELSE 'e|' || source || '|' || entry_id || '|' || coalesce(timestamp_ms, '') || '|'
            || coalesce(model, '') || '|' || input_tokens || '|' || output_tokens || '|'
            || cache_read_tokens || '|' || cache_write_tokens
  END) VIRTUAL;
-- The kept copy: how many rows share its key (1 = no copy); 0 for the others.
ALTER TABLE usage_records ADD COLUMN copies INTEGER NOT NULL DEFAULT 1;
-- With `copies` in the index, sync tells a key of one row from a key of
-- several without reading table rows.
CREATE INDEX usage_records_dedupe ON usage_records(dedupe_key, copies);

ALTER TABLE tool_call_meta ADD COLUMN copies INTEGER NOT NULL DEFAULT 1;
CREATE INDEX tool_call_meta_call_id ON tool_call_meta(call_id, copies);

DROP VIEW v_usage_records;
CREATE VIEW v_usage_records AS
SELECT u.entry_rowid, u.source, u.file_id, u.session_id, u.entry_id, u.timestamp_ms,
       u.provider, u.model, u.response_id,
       u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens, u.total_tokens,
       u.cost_input, u.cost_output, u.cost_cache_read, u.cost_cache_write, u.cost_total,
       CASE WHEN u.total_tokens > 0 AND coalesce(u.cost_total, 0) = 0 THEN 1 ELSE 0 END AS unpriced,
       s.project_dir, s.cwd, u.dedupe_key, u.copies
FROM usage_records u
LEFT JOIN sessions s ON s.file_id = u.file_id
WHERE u.copies > 0;

DROP VIEW v_tool_calls_dedup;
CREATE VIEW v_tool_calls_dedup AS
SELECT t.file_id, t.session_id, t.entry_id, t.entry_rowid, t.call_id, t.name, t.timestamp_ms,
       t.result_entry_id, t.result_timestamp_ms, t.is_error, t.result_len,
       t.result_timestamp_ms - t.timestamp_ms AS duration_ms,
       s.project_dir
FROM tool_call_meta t
LEFT JOIN sessions s ON s.file_id = t.file_id
WHERE t.copies > 0;
