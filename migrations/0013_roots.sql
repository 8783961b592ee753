-- piidx schema 13: the index remembers its roots.
--
-- `piidx sync` with no --root syncs every root synced before, and every
-- place Pi 1.5 may have written sessions (src/roots.rs); --root adds a
-- root, `piidx roots --forget DIR` removes one with its rows. A root's
-- layout says which of its files Pi's listAll() lists (sessions.listed_by_pi).
CREATE TABLE roots(
  path     TEXT PRIMARY KEY,  -- absolute, as synced
  layout   TEXT NOT NULL,     -- per_cwd: Pi lists <root>/*/*.jsonl; flat: <root>/*.jsonl
  origin   TEXT NOT NULL,     -- user (--root), env, settings, project_settings, default
  added_at TEXT NOT NULL      -- ISO time of the first sync that walked it
) WITHOUT ROWID;

-- Roots of databases synced before: the roots their files were found
-- under, in the layout piidx assumed then.
INSERT OR IGNORE INTO roots(path, layout, origin, added_at)
SELECT DISTINCT root, 'per_cwd', 'user', strftime('%Y-%m-%dT%H:%M:%fZ', 'now') FROM files;
