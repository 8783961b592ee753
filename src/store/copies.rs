//! Fork copies: which row of `usage_records` and of `tool_call_meta` stands
//! for the rows that repeat it (column `copies`, migration 0009).
//!
//! A fork (`/fork`, `/clone`, `forkFrom`) copies its parent's entries, so one
//! API response's usage and one tool call appear in several files. Rows are
//! copies when they share `usage_records.dedupe_key`, or a tool call's
//! `call_id`, `name` and `timestamp_ms`. The kept row is the copy in the
//! oldest session (the original, not the fork), then the first file by path,
//! then the first in its file; its `copies` counts the rows it stands for and
//! every other copy has 0. The path, not `file_id`, breaks ties so that any
//! sequence of syncs keeps the row a fresh sync keeps.
//!
//! The views `v_usage_records` and `v_tool_calls_dedup` sorted every row by
//! that key at each query: 0.3–0.7 s on a 1 GB corpus. Sync now keeps the
//! column current instead. Temporary triggers on the writer's connection
//! note every key whose rows were inserted or deleted, or whose session's
//! creation time was (re)written; each commit recomputes those keys only.
//! A first load (`Writer::begin_bulk_load`) goes without them, and without
//! the two indexes of the keys, and counts every repeated key once at its
//! end (`KEY_INDEXES`).

use super::{Result, Writer};

/// The keys noted since the last commit: temporary tables of the writer's
/// connection (`temp` schema: invisible to other connections, gone when it
/// closes).
const TOUCHED: &str = "
CREATE TEMP TABLE IF NOT EXISTS usage_touched(dedupe_key TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TEMP TABLE IF NOT EXISTS tool_touched(call_id TEXT PRIMARY KEY) WITHOUT ROWID;
";

/// Triggers of the writer's connection that note them.
const TRACKING: &str = "
CREATE TEMP TRIGGER IF NOT EXISTS usage_inserted AFTER INSERT ON main.usage_records BEGIN
  INSERT OR IGNORE INTO usage_touched VALUES (NEW.dedupe_key);
END;
CREATE TEMP TRIGGER IF NOT EXISTS usage_deleted AFTER DELETE ON main.usage_records BEGIN
  INSERT OR IGNORE INTO usage_touched VALUES (OLD.dedupe_key);
END;
CREATE TEMP TRIGGER IF NOT EXISTS tool_inserted AFTER INSERT ON main.tool_call_meta
  WHEN NEW.call_id IS NOT NULL BEGIN
  INSERT OR IGNORE INTO tool_touched VALUES (NEW.call_id);
END;
CREATE TEMP TRIGGER IF NOT EXISTS tool_deleted AFTER DELETE ON main.tool_call_meta
  WHEN OLD.call_id IS NOT NULL BEGIN
  INSERT OR IGNORE INTO tool_touched VALUES (OLD.call_id);
END;
CREATE TEMP TRIGGER IF NOT EXISTS session_written AFTER INSERT ON main.sessions BEGIN
  INSERT OR IGNORE INTO usage_touched SELECT dedupe_key FROM usage_records WHERE file_id = NEW.file_id;
  INSERT OR IGNORE INTO tool_touched
    SELECT call_id FROM tool_call_meta WHERE file_id = NEW.file_id AND call_id IS NOT NULL;
END;
CREATE TEMP TRIGGER IF NOT EXISTS session_created_changed AFTER UPDATE OF created_ms ON main.sessions BEGIN
  INSERT OR IGNORE INTO usage_touched SELECT dedupe_key FROM usage_records WHERE file_id = NEW.file_id;
  INSERT OR IGNORE INTO tool_touched
    SELECT call_id FROM tool_call_meta WHERE file_id = NEW.file_id AND call_id IS NOT NULL;
END;
";

/// Which rows a recomputation looks at.
#[derive(Clone, Copy)]
pub(super) enum Scope {
    /// Keys noted by the triggers since the last commit.
    Touched,
    /// Every row (the upgrade to schema 9, `doctor --fix`).
    All,
}

/// The touched keys whose rows may need a new `copies`: those of several
/// rows, or of a row that is not alone already. Most keys have one row, with
/// `copies = 1`; the index on (key, copies) rules them out without reading
/// a table row, which about halves the recomputation of a first sync.
fn touched_keys(table: &str, key: &str, touched: &str) -> String {
    format!(
        "SELECT k.{key} FROM temp.{touched} k
          WHERE (SELECT count(*) FROM {table} c WHERE c.{key} = k.{key}) > 1
             OR EXISTS (SELECT 1 FROM {table} c WHERE c.{key} = k.{key} AND c.copies <> 1)"
    )
}

/// `copies` as it should be for the usage rows of the scope's keys: the
/// kept copy first in (session creation, path, position) order.
fn usage_copies(scope: Scope) -> String {
    let filter = match scope {
        Scope::Touched => format!(
            "u.dedupe_key IN ({})",
            touched_keys("usage_records", "dedupe_key", "usage_touched")
        ),
        Scope::All => "1".to_owned(),
    };
    format!(
        "SELECT u.entry_rowid, u.source,
                CASE WHEN row_number() OVER w = 1
                     THEN count(*) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
                     ELSE 0 END AS copies
           FROM usage_records u
           JOIN files f ON f.file_id = u.file_id
           LEFT JOIN sessions s ON s.file_id = u.file_id
          WHERE {filter}
         WINDOW w AS (PARTITION BY u.dedupe_key
                      ORDER BY s.created_ms IS NULL, s.created_ms, f.path, u.entry_rowid)"
    )
}

/// The same for tool calls with an id (one without an id has no copies: it
/// keeps the default 1).
fn tool_copies(scope: Scope) -> String {
    let filter = match scope {
        Scope::Touched => format!(
            "t.call_id IN ({})",
            touched_keys("tool_call_meta", "call_id", "tool_touched")
        ),
        Scope::All => "t.call_id IS NOT NULL".to_owned(),
    };
    format!(
        "SELECT t.entry_rowid, t.json_path,
                CASE WHEN row_number() OVER w = 1
                     THEN count(*) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
                     ELSE 0 END AS copies
           FROM tool_call_meta t
           JOIN files f ON f.file_id = t.file_id
           LEFT JOIN sessions s ON s.file_id = t.file_id
          WHERE {filter}
         WINDOW w AS (PARTITION BY t.call_id, t.name, t.timestamp_ms
                      ORDER BY s.created_ms IS NULL, s.created_ms, f.path, t.entry_rowid)"
    )
}

/// Brings `copies` up to date for the scope, inside the caller's
/// transaction, writing only the values that change.
pub(super) fn refresh(conn: &rusqlite::Connection, scope: Scope) -> rusqlite::Result<()> {
    let usage = format!(
        "UPDATE usage_records SET copies = c.copies FROM ({}) c
          WHERE usage_records.entry_rowid = c.entry_rowid AND usage_records.source = c.source
            AND usage_records.copies <> c.copies",
        usage_copies(scope)
    );
    let tools = format!(
        "UPDATE tool_call_meta SET copies = c.copies FROM ({}) c
          WHERE tool_call_meta.entry_rowid = c.entry_rowid AND tool_call_meta.json_path = c.json_path
            AND tool_call_meta.copies <> c.copies",
        tool_copies(scope)
    );
    conn.prepare_cached(&usage)?.execute([])?;
    conn.prepare_cached(&tools)?.execute([])?;
    match scope {
        Scope::Touched => {
            conn.prepare_cached("DELETE FROM temp.usage_touched")?
                .execute([])?;
            conn.prepare_cached("DELETE FROM temp.tool_touched")?
                .execute([])?;
        }
        Scope::All => {
            conn.execute(
                "UPDATE tool_call_meta SET copies = 1 WHERE call_id IS NULL AND copies <> 1",
                [],
            )?;
        }
    }
    Ok(())
}

/// The two indexes whose keys (a response id, a tool call id) come in no
/// order: each commit of a first load rewrote nearly every page of them, and
/// journaled it first, so their cost grew with the square of the corpus
/// (docs/performance.md). A first load goes without them and without the
/// triggers, and builds them once at its end (`Writer::count_copies_after_load`).
/// As in migration 0009.
const KEY_INDEXES: &str = "
CREATE INDEX IF NOT EXISTS usage_records_dedupe ON usage_records(dedupe_key, copies);
CREATE INDEX IF NOT EXISTS tool_call_meta_call_id ON tool_call_meta(call_id, copies);
";

/// Drops the indexes of `KEY_INDEXES`.
const NO_KEY_INDEXES: &str = "
DROP INDEX IF EXISTS usage_records_dedupe;
DROP INDEX IF EXISTS tool_call_meta_call_id;
";

/// Drops the tracking triggers of `TRACKING` (the temp tables stay, empty).
const UNTRACKING: &str = "
DROP TRIGGER IF EXISTS temp.usage_inserted;
DROP TRIGGER IF EXISTS temp.usage_deleted;
DROP TRIGGER IF EXISTS temp.tool_inserted;
DROP TRIGGER IF EXISTS temp.tool_deleted;
DROP TRIGGER IF EXISTS temp.session_written;
DROP TRIGGER IF EXISTS temp.session_created_changed;
";

/// As touched, after a load without tracking, every key whose `copies`
/// may be wrong: those of several rows, and those of a row whose `copies`
/// is not 1 (its copies deleted meanwhile).
const LOADED_KEYS: &str = "
INSERT OR IGNORE INTO temp.usage_touched
  SELECT dedupe_key FROM usage_records GROUP BY dedupe_key
  HAVING count(*) > 1 OR min(copies) <> 1 OR max(copies) <> 1;
INSERT OR IGNORE INTO temp.tool_touched
  SELECT call_id FROM tool_call_meta WHERE call_id IS NOT NULL GROUP BY call_id
  HAVING count(*) > 1 OR min(copies) <> 1 OR max(copies) <> 1;
";

impl Writer {
    /// Installs the triggers that note touched keys; for the sync connection,
    /// after migrations. Not during a first load (`bulk_load_unfinished`):
    /// its end counts every key's copies at once. The key indexes are made
    /// again if a load's end never came (an older piidx finished it).
    pub(super) fn track_copies(&self) -> Result<()> {
        self.conn.execute_batch(TOUCHED).map_err(self.err())?;
        if self.bulk_load_unfinished()? {
            return Ok(());
        }
        self.conn
            .execute_batch(&format!("{KEY_INDEXES} {TRACKING}"))
            .map_err(self.err())?;
        self.copies_tracked.set(true);
        Ok(())
    }

    /// For a first load: no tracking, and no key indexes until its end.
    /// Inside the caller's transaction.
    pub(super) fn stop_tracking_copies(&self) -> Result<()> {
        self.conn
            .execute_batch(&format!("{UNTRACKING} {NO_KEY_INDEXES}"))
            .map_err(self.err())?;
        self.copies_tracked.set(false);
        Ok(())
    }

    /// The end of a first load: the key indexes built, every repeated key's
    /// copies counted, and tracking on again. Inside the caller's
    /// transaction.
    pub(super) fn count_copies_after_load(&self) -> Result<()> {
        self.conn
            .execute_batch(&format!("{TOUCHED} {TRACKING} {KEY_INDEXES} {LOADED_KEYS}"))
            .map_err(self.err())?;
        self.copies_tracked.set(true);
        refresh(&self.conn, Scope::Touched).map_err(self.err())
    }

    /// Part of every commit, inside the transaction; nothing without
    /// tracking (a first load): without the key indexes, each recount
    /// would read every usage and tool-call row.
    pub(super) fn refresh_copies(&self) -> Result<()> {
        if !self.copies_tracked.get() {
            return Ok(());
        }
        refresh(&self.conn, Scope::Touched).map_err(self.err())
    }

    /// For `doctor`: how many rows' `copies` differ from a recomputation
    /// from scratch (a bug, or rows changed behind piidx's back).
    pub fn stale_copies(&self) -> Result<i64> {
        let sql = format!(
            "SELECT (SELECT count(*) FROM ({}) c JOIN usage_records u
                      ON u.entry_rowid = c.entry_rowid AND u.source = c.source
                     WHERE u.copies <> c.copies)
                  + (SELECT count(*) FROM ({}) c JOIN tool_call_meta t
                      ON t.entry_rowid = c.entry_rowid AND t.json_path = c.json_path
                     WHERE t.copies <> c.copies)
                  + (SELECT count(*) FROM tool_call_meta WHERE call_id IS NULL AND copies <> 1)",
            usage_copies(Scope::All),
            tool_copies(Scope::All)
        );
        self.conn
            .query_row(&sql, [], |row| row.get(0))
            .map_err(self.err())
    }

    /// For `doctor --fix`: recomputes every row's `copies`.
    pub fn recount_copies(&self) -> Result<()> {
        self.begin()?;
        refresh(&self.conn, Scope::All).map_err(self.err())?;
        self.conn.execute_batch("COMMIT").map_err(self.err())
    }
}
