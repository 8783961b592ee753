-- piidx schema 30: oh-my-pi runs a `task` spawn in the background by
-- default (`async.enabled`, task/index.ts). Its tool result then holds the
-- spawn only in `details.progress[i]`, with `details.results` empty, so an
-- older piidx recorded no run for it; the outcome arrives later in the same
-- session as an `async-result` custom message (session/async-job-delivery.ts).
--
-- subagent_runs: such a spawn is a run now (`mode` 'background', `json_path`
-- `$.message.details.progress[i]`, status as written: 'pending').
--
-- subagent_deliveries: one row per job an `async-result` message delivers:
-- its id (the spawn's, whose transcript is `<id>.jsonl`), the status its
-- `<task-result>` envelope gives ('completed', 'failed' or 'aborted', as
-- omp's task tool sets the spawn's `progress.status`), the exit code,
-- duration and, in a `hub` snapshot, the job's resolved model. Each sync applies the latest delivery of a job to the run with
-- that id in the same session file.
--
-- omp's sessions are read again by the next sync (their files marked as read
-- by an older parser), so an upgraded index holds what a fresh sync writes.
CREATE TABLE subagent_deliveries(
  entry_rowid  INTEGER NOT NULL,
  file_id      INTEGER NOT NULL,
  position     INTEGER NOT NULL,
  job_id       TEXT NOT NULL,
  status       TEXT NOT NULL,
  exit_code    INTEGER,
  duration_ms  INTEGER,
  model        TEXT,
  PRIMARY KEY(entry_rowid, position)
);
CREATE INDEX subagent_deliveries_job ON subagent_deliveries(file_id, job_id);
UPDATE files SET parser_version = 0
 WHERE file_id IN (SELECT file_id FROM sessions WHERE agent = 'omp');
