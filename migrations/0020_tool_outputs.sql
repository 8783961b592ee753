-- piidx schema 20: oh-my-pi's full tool outputs (`<session>/<N>.<tool>.log`).
--
-- omp keeps a truncated tool output in the session and the whole output in
-- its session's artifact folder (the session file without `.jsonl`; its
-- subagents share the folder and the numbering), referenced from the tool
-- result as `artifact://<N>` and `details.meta.truncation.artifactId`. The
-- artifacts pass reads each such file into a `subagent_artifacts` row of
-- kind 'tool_output' (text searchable through `artifact_fts`, `base` = N):
--
-- * subagent_artifacts.session_path: the session file whose folder holds it.
-- * subagent_artifacts.entry_rowid: the tool result that references it,
--   re-derived after every sync like the other links (NULL when none does).

ALTER TABLE subagent_artifacts ADD COLUMN session_path TEXT;
ALTER TABLE subagent_artifacts ADD COLUMN entry_rowid INTEGER;
CREATE INDEX subagent_artifacts_entry ON subagent_artifacts(entry_rowid);
