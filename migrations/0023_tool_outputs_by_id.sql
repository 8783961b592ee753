-- piidx schema 23: an omp full output is found by its number.
--
-- Sync's and doctor's check for full outputs that are gone
-- (src/store/check.rs) asks, for each truncated tool result, whether a
-- `tool_output` artifact of its number is in the session's folder. The
-- one index on `base` starts with `project_dir`, which the check does not
-- know, so each result read every artifact: 9 million rows for a session
-- of 3,000 truncated results, 2.7 s of each sync that read it.
CREATE INDEX subagent_artifacts_output ON subagent_artifacts(base, session_path)
  WHERE kind = 'tool_output';
