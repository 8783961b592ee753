-- piidx schema 26: a parent recorded under another root found in an index.
--
-- A session may name its parent by a path under another root (a tree
-- indexed from a copy): the parent is then the session whose path ends as
-- the recorded one does, `/<cwd-dir>/<file>.jsonl`. Asked as "ends with",
-- no index served it: each session whose parent was not indexed yet read
-- every session, and each session written read every child not linked yet
-- (0.6 s of a cold sync of 10,000 files, growing with the square of their
-- number). Each path's part from its second-to-last '/' is now kept
-- (`file_tail`, and `parent_tail` of `parent_session`) and indexed: a
-- recorded path ends with a tail exactly when its own tail is that tail.
-- sync writes them (src/store/write.rs, `tail_key`); the rows already
-- there get the same value from the expression below.
ALTER TABLE sessions ADD COLUMN file_tail TEXT;
ALTER TABLE sessions ADD COLUMN parent_tail TEXT;
UPDATE sessions SET
  file_tail = substr(file_path, length(rtrim(rtrim(rtrim(file_path, replace(file_path, '/', '')), '/'),
                                             replace(file_path, '/', '')))),
  parent_tail = substr(parent_session, length(rtrim(rtrim(rtrim(parent_session, replace(parent_session, '/', '')), '/'),
                                                    replace(parent_session, '/', ''))));
CREATE INDEX sessions_file_tail ON sessions(file_tail);
CREATE INDEX sessions_unlinked_tail ON sessions(parent_tail)
  WHERE parent_session_id IS NULL AND parent_tail IS NOT NULL;
