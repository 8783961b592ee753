-- piidx schema 19: which coding agent wrote each session, and what
-- oh-my-pi and pi_agent_rust keep beyond Pi's own shapes.
--
-- * sessions.agent: 'pi' (upstream Pi), 'omp' (oh-my-pi) or
--   'pi_agent_rust' (the Rust port); rows already there say 'pi' until the
--   next sync re-reads every file (parser version 7).
-- * sessions.title_slot: an omp file's first line, a fixed-size title slot
--   omp rewrites in place; read again on every change of the file, never
--   the whole file for it. NULL for files without one.
-- * sessions.short_summary: the last compaction `shortSummary` (omp), the
--   name omp's /resume falls back to.
-- * message_meta.attribution: omp's `attribution` (`user` or `agent`).

ALTER TABLE sessions ADD COLUMN agent TEXT NOT NULL DEFAULT 'pi';
ALTER TABLE sessions ADD COLUMN title_slot TEXT;
ALTER TABLE sessions ADD COLUMN short_summary TEXT;
CREATE INDEX sessions_agent ON sessions(agent);
ALTER TABLE message_meta ADD COLUMN attribution TEXT;
