-- piidx schema: usage and tool analytics views (`piidx usage`, `piidx tools`).
-- Views only: nothing here changes what sync writes. See docs/schema.md
-- "Usage and tool analytics".

-- Every usage record counted once. Fork copies (`/fork`, `/clone`,
-- forkFrom) and re-flushed duplicate lines repeat an entry verbatim, so the
-- same API response appears in several rows of usage_records. Rows are the
-- same usage when they share `response_id` (per source), or, without one,
-- when entry id, timestamp, model and all four token counts agree. One
-- representative is kept: the copy in the oldest session (the original, not
-- the fork), then the lowest file_id and entry_rowid. `copies` says how many
-- rows were folded into it.
CREATE VIEW v_usage_records AS
SELECT entry_rowid, source, file_id, session_id, entry_id, timestamp_ms,
       provider, model, response_id,
       input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, total_tokens,
       cost_input, cost_output, cost_cache_read, cost_cache_write, cost_total,
       CASE WHEN total_tokens > 0 AND coalesce(cost_total, 0) = 0 THEN 1 ELSE 0 END AS unpriced,
       project_dir, cwd, dedupe_key, copies
FROM (
  SELECT u.*, s.project_dir, s.cwd,
         row_number() OVER w AS copy_no,
         count(*) OVER (PARTITION BY k.dedupe_key) AS copies,
         k.dedupe_key
  FROM usage_records u
  JOIN (SELECT entry_rowid, source,
               CASE WHEN response_id IS NOT NULL AND response_id <> ''
                    THEN 'r|' || source || '|' || response_id
                    ELSE 'e|' || source || '|' || entry_id || '|' || coalesce(timestamp_ms, '') || '|'
                         || coalesce(model, '') || '|' || input_tokens || '|' || output_tokens || '|'
                         || cache_read_tokens || '|' || cache_write_tokens
               END AS dedupe_key
          FROM usage_records) k
    ON k.entry_rowid = u.entry_rowid AND k.source = u.source
  LEFT JOIN sessions s ON s.file_id = u.file_id
  WINDOW w AS (PARTITION BY k.dedupe_key
               ORDER BY s.created_ms IS NULL, s.created_ms, u.file_id, u.entry_rowid)
)
WHERE copy_no = 1;

-- Tokens and dollars per UTC day and model (deduplicated). `unpriced_tokens`
-- are tokens of records with cost 0 or missing: they are not free, Pi could
-- not price them.
CREATE VIEW v_usage_daily AS
SELECT date(timestamp_ms / 1000, 'unixepoch') AS day,
       provider, model,
       count(*) AS records,
       sum(input_tokens) AS input_tokens,
       sum(output_tokens) AS output_tokens,
       sum(cache_read_tokens) AS cache_read_tokens,
       sum(cache_write_tokens) AS cache_write_tokens,
       sum(total_tokens) AS total_tokens,
       coalesce(sum(cost_total), 0) AS cost_total,
       sum(CASE WHEN unpriced = 1 THEN total_tokens ELSE 0 END) AS unpriced_tokens
FROM v_usage_records
GROUP BY day, provider, model;

CREATE VIEW v_usage_by_model AS
SELECT provider, model,
       count(*) AS records,
       sum(input_tokens) AS input_tokens,
       sum(output_tokens) AS output_tokens,
       sum(cache_read_tokens) AS cache_read_tokens,
       sum(cache_write_tokens) AS cache_write_tokens,
       sum(total_tokens) AS total_tokens,
       coalesce(sum(cost_total), 0) AS cost_total,
       sum(CASE WHEN unpriced = 1 THEN total_tokens ELSE 0 END) AS unpriced_tokens,
       min(timestamp_ms) AS first_ms,
       max(timestamp_ms) AS last_ms
FROM v_usage_records
GROUP BY provider, model;

CREATE VIEW v_usage_by_project AS
SELECT project_dir,
       count(*) AS records,
       sum(input_tokens) AS input_tokens,
       sum(output_tokens) AS output_tokens,
       sum(cache_read_tokens) AS cache_read_tokens,
       sum(cache_write_tokens) AS cache_write_tokens,
       sum(total_tokens) AS total_tokens,
       coalesce(sum(cost_total), 0) AS cost_total,
       sum(CASE WHEN unpriced = 1 THEN total_tokens ELSE 0 END) AS unpriced_tokens
FROM v_usage_records
GROUP BY project_dir;

-- Per session file: usage attributed to the session holding the kept copy
-- (a fork's copied history counts for the original session).
CREATE VIEW v_usage_by_session AS
SELECT u.file_id, u.session_id, s.file_path, u.project_dir,
       count(*) AS records,
       sum(u.input_tokens) AS input_tokens,
       sum(u.output_tokens) AS output_tokens,
       sum(u.cache_read_tokens) AS cache_read_tokens,
       sum(u.cache_write_tokens) AS cache_write_tokens,
       sum(u.total_tokens) AS total_tokens,
       coalesce(sum(u.cost_total), 0) AS cost_total,
       sum(CASE WHEN u.unpriced = 1 THEN u.total_tokens ELSE 0 END) AS unpriced_tokens,
       min(u.timestamp_ms) AS first_ms,
       max(u.timestamp_ms) AS last_ms
FROM v_usage_records u LEFT JOIN sessions s ON s.file_id = u.file_id
GROUP BY u.file_id;

-- Tool calls counted once across fork copies (same call id, name and call
-- time), with the project of the kept copy.
CREATE VIEW v_tool_calls_dedup AS
SELECT file_id, session_id, entry_id, entry_rowid, call_id, name, timestamp_ms,
       result_entry_id, result_timestamp_ms, is_error, result_len, duration_ms, project_dir
FROM (
  SELECT t.file_id, t.session_id, t.entry_id, t.entry_rowid, t.call_id, t.name, t.timestamp_ms,
         t.result_entry_id, t.result_timestamp_ms, t.is_error, t.result_len,
         t.result_timestamp_ms - t.timestamp_ms AS duration_ms,
         s.project_dir,
         row_number() OVER (
           PARTITION BY coalesce(t.call_id, t.file_id || '|' || t.entry_rowid || '|' || t.json_path),
                        t.name, t.timestamp_ms
           ORDER BY s.created_ms IS NULL, s.created_ms, t.file_id, t.entry_rowid) AS copy_no
  FROM tool_call_meta t LEFT JOIN sessions s ON s.file_id = t.file_id
)
WHERE copy_no = 1;

-- Per tool name: calls, errors, error rate, nearest-rank median and p95 of
-- call -> result milliseconds (calls with a result and a non-negative
-- duration), largest and total result text length.
CREATE VIEW v_tool_stats AS
WITH ranked AS (
  SELECT name, duration_ms,
         row_number() OVER (PARTITION BY name ORDER BY duration_ms) AS rank_no,
         count(*) OVER (PARTITION BY name) AS timed
  FROM v_tool_calls_dedup
  WHERE duration_ms IS NOT NULL AND duration_ms >= 0
),
pct AS (
  SELECT name,
         max(CASE WHEN rank_no = (timed + 1) / 2 THEN duration_ms END) AS median_ms,
         max(CASE WHEN rank_no = CAST((timed * 95 + 99) / 100 AS INTEGER) THEN duration_ms END) AS p95_ms
  FROM ranked GROUP BY name
)
SELECT c.name,
       count(*) AS calls,
       sum(CASE WHEN c.is_error = 1 THEN 1 ELSE 0 END) AS errors,
       round(1.0 * sum(CASE WHEN c.is_error = 1 THEN 1 ELSE 0 END) / count(*), 4) AS error_rate,
       sum(CASE WHEN c.result_timestamp_ms IS NULL THEN 1 ELSE 0 END) AS no_result,
       p.median_ms, p.p95_ms,
       max(c.result_len) AS max_result_len,
       sum(c.result_len) AS total_result_len
FROM v_tool_calls_dedup c LEFT JOIN pct p ON p.name IS c.name
GROUP BY c.name;
