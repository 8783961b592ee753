-- piidx schema 24: a session finds its waiting children in an index.
--
-- Each session a sync writes links the sessions that name it as their
-- parent (src/store/write.rs). A child may name its parent by a path that
-- only ends like the parent's (a tree indexed from a copy), which no index
-- on `parent_session` finds: every session written read every session,
-- 0.15 ms each at 3,000 sessions, growing with the square of their number.
-- Only children not linked yet can be linked by that rule; they are few,
-- and this index holds them alone.
CREATE INDEX sessions_unlinked ON sessions(parent_session)
  WHERE parent_session_id IS NULL AND parent_session IS NOT NULL;
