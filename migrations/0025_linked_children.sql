-- piidx schema 25: a session that loses its rows finds its children in an
-- index.
--
-- When a session file is deleted or rewritten, the sessions linked to it as
-- their parent are linked again (src/store/write.rs, `relink_children`).
-- Nothing indexed `parent_session_id`, so each read every session: a sync
-- that found 5,000 of 10,000 session files deleted took 8.8 s, half of it
-- in that statement, growing with the square of their number. Only children have a parent id; the
-- index holds them alone.
CREATE INDEX sessions_parent_id ON sessions(parent_session_id)
  WHERE parent_session_id IS NOT NULL;
