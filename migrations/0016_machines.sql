-- Machines (issue 28): every index has a machine id, and a tree copied
-- from another machine can be synced under that machine's label, so that
-- a team store (PostgreSQL, `piidx push`) tells whose sessions are whose.

-- The index's own stable id: made once, never changed (the host name may
-- change; `meta.machine_name`, written by `sync`, is the label shown).
INSERT OR IGNORE INTO meta(key, value) VALUES ('machine_uid', lower(hex(randomblob(16))));

-- The machine a root's files come from: NULL for this index's own machine,
-- else the label given with `sync --root DIR --machine NAME`.
ALTER TABLE roots ADD COLUMN machine TEXT;

-- What this index last pushed to each team store, per file (the store
-- keeps the same record, which wins: see docs/postgres.md). `target` is the
-- store's URL without its password; `sig` is the file's change signature.
CREATE TABLE push_files(
  target TEXT NOT NULL,
  file_id INTEGER NOT NULL,
  sig TEXT NOT NULL,
  pushed_at TEXT NOT NULL,
  PRIMARY KEY (target, file_id)
) WITHOUT ROWID;
