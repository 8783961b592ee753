-- piidx schema 0003 (views branch): tree facts and fork copies, all as views.
--
-- Nothing here is maintained by the writer: the active path changes with
-- every append, so it is computed on read. Recursive CTEs are cycle-guarded
-- by a depth limit (a path can never be longer than the file's entry count).
-- Glued objects (recovered from a line Pi could not parse) are ignored, as
-- Pi never sees them; in v1 files (synthetic chain) the walk passes through
-- them, as Pi's migration chains only the lines it parsed. Duplicate ids resolve to the LAST occurrence, like
-- Pi's byId Map.

-- Entries on each session's current branch: the path from the leaf (the
-- last entry in file order) to its root. depth 0 = the leaf.
CREATE VIEW v_active_path AS
WITH RECURSIVE walk(file_id, entry_rowid, depth, max_depth, v1) AS (
  SELECT s.file_id,
         (SELECT max(e.entry_rowid) FROM entries e WHERE e.file_id = s.file_id AND e.glued = 0),
         0,
         s.entry_count,
         s.version < 2
  FROM sessions s
  UNION ALL
  SELECT w.file_id,
         (SELECT max(p.entry_rowid) FROM entries p
           WHERE p.file_id = w.file_id AND p.entry_id = e.parent_id
             AND (p.glued = 0 OR w.v1)),
         w.depth + 1,
         w.max_depth,
         w.v1
  FROM walk w JOIN entries e ON e.entry_rowid = w.entry_rowid
  WHERE e.parent_id IS NOT NULL AND w.depth < w.max_depth
)
SELECT w.file_id, e.session_id, w.entry_rowid, e.entry_id, e.parent_id, e.type,
       min(w.depth) AS depth
FROM walk w JOIN entries e ON e.entry_rowid = w.entry_rowid
WHERE e.glued = 0
GROUP BY w.file_id, w.entry_rowid;

-- Entries whose parentId names no entry of the same file (Pi treats them as
-- roots), and entries that are their own parent.
CREATE VIEW v_orphans AS
SELECT e.entry_rowid, e.file_id, e.session_id, e.entry_id, e.parent_id, e.type, e.line_no,
       CASE WHEN e.parent_id = e.entry_id THEN 'self_parent' ELSE 'missing_parent' END AS reason
FROM entries e
WHERE e.parent_id IS NOT NULL AND e.glued = 0
  AND (e.parent_id = e.entry_id
       OR NOT EXISTS (SELECT 1 FROM entries p
                       WHERE p.file_id = e.file_id AND p.entry_id = e.parent_id AND p.glued = 0));

-- Shape of each session's tree. branch_points = entries with two or more
-- children; leaves = entries without children; roots = parentId null,
-- missing or self.
CREATE VIEW v_session_branches AS
SELECT s.file_id, s.session_id, s.file_path,
       (SELECT count(*) FROM (SELECT 1 FROM entries c
                               WHERE c.file_id = s.file_id AND c.glued = 0 AND c.parent_id IS NOT NULL
                               GROUP BY c.parent_id HAVING count(DISTINCT c.entry_id) > 1)) AS branch_points,
       (SELECT count(DISTINCT e.entry_id) FROM entries e
         WHERE e.file_id = s.file_id AND e.glued = 0
           AND NOT EXISTS (SELECT 1 FROM entries c WHERE c.file_id = e.file_id AND c.glued = 0
                             AND c.parent_id = e.entry_id AND c.entry_id <> e.entry_id)) AS leaves,
       (SELECT count(*) FROM entries e WHERE e.file_id = s.file_id AND e.glued = 0
           AND e.parent_id IS NULL)
       + (SELECT count(*) FROM v_orphans o WHERE o.file_id = s.file_id) AS roots
FROM sessions s;

-- Entries of a fork (a session whose header names a parent session) that are
-- verbatim copies of an entry of the parent file: same id and same stored
-- JSON. Exclude them to avoid counting messages and usage twice, e.g.
--   SELECT sum(total_tokens) FROM usage_records u
--    WHERE NOT EXISTS (SELECT 1 FROM v_fork_copies f WHERE f.entry_rowid = u.entry_rowid)
CREATE VIEW v_fork_copies AS
SELECT e.entry_rowid, e.file_id, e.session_id, e.entry_id,
       p.file_id AS parent_file_id, p.entry_rowid AS parent_entry_rowid
FROM sessions c
JOIN entries e ON e.file_id = c.file_id
JOIN sessions ps ON ps.session_id = c.parent_session_id AND ps.file_id <> c.file_id
JOIN entries p ON p.file_id = ps.file_id AND p.entry_id = e.entry_id AND p.raw = e.raw
WHERE c.parent_session_id IS NOT NULL
GROUP BY e.entry_rowid;
