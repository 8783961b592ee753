//! The SQL behind `piidx doctor`: integrity checks, per-file row counts, and
//! the repairs (mark files for re-indexing, rebuild the FTS index).

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::subagents::session_files_above;
use super::{Result, Writer, sqlite_error};

/// What a database says it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    pub application_id: i64,
    pub user_version: i64,
    pub has_tables: bool,
}

/// Rows one file has in the index.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileCounts {
    pub entries: i64,
    pub parse_errors: i64,
    pub has_session: bool,
}

/// The files of the index at `db` (itself and its shards) that hold the
/// unfinished write of a piidx that was killed: a hot journal, which the
/// next connection that may write rolls back. Looks without writing.
pub fn unfinished_writes(db: &Path) -> Vec<std::path::PathBuf> {
    let shards = (0..).map(|k| super::shard_path(db, k));
    let files = std::iter::once(db.to_owned()).chain(shards.take_while(|path| path.exists()));
    files
        .filter(|path| {
            let probe = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
                .and_then(|conn| {
                    conn.query_row("SELECT count(*) FROM sqlite_schema", [], |_| Ok(()))
                });
            matches!(
                probe.map_err(sqlite_error(path)),
                Err(super::StoreError::NeedsRecovery { .. })
            )
        })
        .collect()
}

impl Writer {
    /// Opens an existing database read-write (never creating it) without
    /// checking or migrating its schema, so `doctor` can look at anything.
    pub fn open_for_doctor(path: &Path) -> Result<Self> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI;
        let cannot_open = |err: &rusqlite::Error| matches!(err, rusqlite::Error::SqliteFailure(e, _) if e.code == rusqlite::ErrorCode::CannotOpen);
        let opened = Connection::open_with_flags(path, flags).and_then(|conn| {
            match conn.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(())) {
                Err(err) if cannot_open(&err) => Err(err),
                _ => Ok(conn),
            }
        });
        let conn = match opened {
            Ok(conn) => conn,
            // Read-only media: look without writing (doctor without --fix).
            Err(_) => Connection::open_with_flags(
                format!("file:{}?immutable=1", super::uri_path(path)),
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
            )
            .map_err(sqlite_error(path))?,
        };
        conn.busy_timeout(Duration::from_secs(10))
            .map_err(sqlite_error(path))?;
        super::functions::register(&conn).map_err(sqlite_error(path))?;
        Ok(Writer::wrap(conn, path))
    }

    pub fn identity(&self) -> Result<Identity> {
        super::schema::identity(&self.conn, &self.path)
    }

    /// `PRAGMA quick_check`: empty when the file is sound, else SQLite's
    /// findings (at most 20).
    pub fn quick_check(&self) -> Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare("PRAGMA quick_check(20)")
            .map_err(self.err())?;
        let rows = stmt
            .query_map([], |row| row.get::<_, String>(0))
            .map_err(self.err())?;
        let mut found = Vec::new();
        for row in rows {
            let row = row.map_err(self.err())?;
            if row != "ok" {
                found.push(row);
            }
        }
        Ok(found)
    }

    /// `(session file, line, artifact id)` of every omp tool result whose
    /// full output (`details.meta.truncation.artifactId`) has no
    /// `tool_output` artifact row: the `.log` is missing.
    pub fn missing_tool_outputs(&self) -> Result<Vec<(String, i64, String)>> {
        self.missing_tool_outputs_where("")
    }

    /// `missing_tool_outputs` of the session files at `paths` only (sync
    /// warns about the files it read and those whose `.log` went).
    pub fn missing_tool_outputs_of(&self, paths: &[String]) -> Result<Vec<(String, i64, String)>> {
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        self.fill_checked_paths(paths)?;
        self.missing_tool_outputs_where(CHECKED_PATHS_ONLY)
    }

    fn missing_tool_outputs_where(&self, only: &str) -> Result<Vec<(String, i64, String)>> {
        let sql = missing_tool_outputs_sql(only);
        let mut stmt = self.conn.prepare(&sql).map_err(self.err())?;
        let not_in_own_session = stmt
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            .map_err(self.err())?
            .collect::<rusqlite::Result<Vec<(String, i64, String)>>>()
            .map_err(self.err())?;
        let mut in_session = self
            .conn
            .prepare(
                "SELECT 1 FROM subagent_artifacts
                  WHERE kind = 'tool_output' AND base = ?1 AND session_path = ?2",
            )
            .map_err(self.err())?;
        let mut missing = Vec::new();
        for (path, line, id) in not_in_own_session {
            let mut in_a_folder = false;
            for session in session_files_above(&path) {
                if in_session.exists((&id, &session)).map_err(self.err())? {
                    in_a_folder = true;
                    break;
                }
            }
            if !in_a_folder {
                missing.push((path, line, id));
            }
        }
        Ok(missing)
    }

    /// `(session file, line, raw)` of the entries that name an image kept
    /// outside the session file (omp's `blob:sha256:`, the port's
    /// `$piBlob`), for doctor to look for their bytes.
    pub fn outside_image_entries(&self) -> Result<Vec<(String, i64, String)>> {
        self.outside_image_entries_where("")
    }

    /// `outside_image_entries` of the omp and pi_agent_rust session files at
    /// `paths` only (the only agents that keep images outside).
    pub fn outside_image_entries_of(&self, paths: &[String]) -> Result<Vec<(String, i64, String)>> {
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        self.fill_checked_paths(paths)?;
        self.outside_image_entries_where(CHECKED_OUTSIDE_AGENTS_ONLY)
    }

    fn outside_image_entries_where(&self, only: &str) -> Result<Vec<(String, i64, String)>> {
        let sql = outside_image_entries_sql(only);
        let mut stmt = self.conn.prepare(&sql).map_err(self.err())?;
        let rows = stmt
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            .map_err(self.err())?;
        rows.collect::<rusqlite::Result<_>>().map_err(self.err())
    }

    /// `temp.checked_paths` holds exactly `paths`.
    fn fill_checked_paths(&self, paths: &[String]) -> Result<()> {
        self.fill_temp_paths("checked_paths", paths)
    }

    /// Row counts per file id, for every file with rows.
    pub fn file_counts(&self) -> Result<HashMap<i64, FileCounts>> {
        let mut counts: HashMap<i64, FileCounts> = HashMap::new();
        let queries = [
            "SELECT file_id, count(*) FROM entries GROUP BY file_id",
            "SELECT file_id, count(*) FROM parse_errors GROUP BY file_id",
            "SELECT file_id, count(*) FROM sessions GROUP BY file_id",
        ];
        for (which, sql) in queries.iter().enumerate() {
            let mut stmt = self.conn.prepare(sql).map_err(self.err())?;
            let rows = stmt
                .query_map([], |row| Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?)))
                .map_err(self.err())?;
            for row in rows {
                let (file_id, n) = row.map_err(self.err())?;
                let slot = counts.entry(file_id).or_default();
                match which {
                    0 => slot.entries = n,
                    1 => slot.parse_errors = n,
                    _ => slot.has_session = n > 0,
                }
            }
        }
        Ok(counts)
    }

    /// `(byte_offset, obj_in_line, raw)` of a file's entries whose offsets
    /// lie in `from..=to`.
    pub fn entry_raws(&self, file_id: i64, from: i64, to: i64) -> Result<Vec<(i64, i64, String)>> {
        self.conn
            .prepare_cached(
                "SELECT byte_offset, obj_in_line, raw FROM entries
                 WHERE file_id = ?1 AND byte_offset BETWEEN ?2 AND ?3",
            )
            .and_then(|mut stmt| {
                stmt.query_map([file_id, from, to], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?))
                })?
                .collect()
            })
            .map_err(self.err())
    }

    /// Every sessions root files were indexed from.
    pub fn roots(&self) -> Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare("SELECT DISTINCT root FROM files ORDER BY root")
            .map_err(self.err())?;
        let rows = stmt
            .query_map([], |row| row.get::<_, String>(0))
            .map_err(self.err())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.err())
    }

    /// Makes the next sync re-read these files from scratch (their stored
    /// parser version no longer matches).
    pub fn mark_for_reindex(&self, file_ids: &[i64]) -> Result<()> {
        let mut stmt = self
            .conn
            .prepare("UPDATE files SET parser_version = 0 WHERE file_id = ?1")
            .map_err(self.err())?;
        for file_id in file_ids {
            stmt.execute([file_id]).map_err(self.err())?;
        }
        Ok(())
    }

    /// Writes the WAL back into the main file and removes it, so the file
    /// alone is the whole database (before it is renamed).
    pub fn checkpoint(&self) -> Result<()> {
        self.conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .map_err(self.err())
    }
}

/// `missing_tool_outputs_where`'s filter for the paths in `temp.checked_paths`.
const CHECKED_PATHS_ONLY: &str = "AND f.path IN (SELECT path FROM temp.checked_paths)";

/// `outside_image_entries_of`'s files: those checked, of the agents that
/// keep images outside. The agent is asked of each file's own session row:
/// as a list of every omp session's file id, it was probed with every
/// checked path (their product).
const CHECKED_OUTSIDE_AGENTS_ONLY: &str = "AND f.path IN (SELECT path FROM temp.checked_paths)
     AND EXISTS (SELECT 1 FROM sessions s
                  WHERE s.file_id = f.file_id AND s.agent IN ('omp', 'pi_agent_rust'))";

/// The query of `outside_image_entries_where`.
fn outside_image_entries_sql(only: &str) -> String {
    format!(
        "SELECT f.path, e.line_no, e.raw
           FROM files f JOIN entries e ON e.file_id = f.file_id
          WHERE (instr(e.raw, '\"blob:sha256:') > 0 OR instr(e.raw, '\"$piBlob\"') > 0) {only}
          ORDER BY f.path, e.line_no"
    )
}

/// The query of `missing_tool_outputs_where`: the results whose output
/// is not in their own session's folder. Its joins run in the order
/// written (`CROSS JOIN`): from omp's sessions (and the paths checked) to
/// their tool results. Left to itself, SQLite started from every tool
/// result of every agent (`message_meta_role`), reading each one's entry,
/// so that every sync paid for the whole index: 40,000 page reads, nine
/// tenths of a one-line append's time on a 1 GB corpus.
fn missing_tool_outputs_sql(only: &str) -> String {
    format!(
        "SELECT x.path, x.line_no, x.id
           FROM (SELECT f.path, e.line_no,
                        CASE WHEN json_valid(e.raw) THEN CAST(json_extract(e.raw,
                          '$.message.details.meta.truncation.artifactId') AS TEXT) END AS id
                   FROM sessions s
                   CROSS JOIN files f ON f.file_id = s.file_id
                   CROSS JOIN message_meta mm ON mm.file_id = s.file_id AND mm.role = 'toolResult'
                   CROSS JOIN entries e ON e.entry_rowid = mm.entry_rowid
                  WHERE s.agent = 'omp' {only}) x
          WHERE x.id IS NOT NULL
            AND NOT EXISTS (SELECT 1 FROM subagent_artifacts a
                             WHERE a.kind = 'tool_output' AND a.base = x.id
                               AND a.session_path = x.path)
          ORDER BY x.path, x.line_no"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sync checks the files it read, of omp's sessions alone: the
    /// query's first loop is over omp's sessions, not over every tool
    /// result of the index (which made a one-line append read it whole).
    #[test]
    fn the_missing_outputs_check_starts_from_omps_sessions() {
        let dir = tempfile::tempdir().unwrap();
        let writer = Writer::open(&dir.path().join("x.db")).unwrap();
        writer.fill_checked_paths(&["a.jsonl".to_owned()]).unwrap();
        let plan =
            crate::store::query_plan(&writer.conn, &missing_tool_outputs_sql(CHECKED_PATHS_ONLY));
        assert!(
            crate::store::first_loop(&plan).contains("sessions_agent"),
            "{plan:#?}"
        );
        // Each result's output is found by its number, not by reading
        // every artifact (schema 23).
        assert!(
            plan.iter()
                .any(|line| line.contains("subagent_artifacts_output (base=? AND session_path=?)")),
            "{plan:#?}"
        );
        assert!(!plan.iter().any(|line| line == "SCAN a"), "{plan:#?}");
    }

    /// The images check of a sync looks up each file it read, once: not
    /// each file with each omp session's id.
    #[test]
    fn the_outside_images_check_reads_each_checked_file_once() {
        let dir = tempfile::tempdir().unwrap();
        let writer = Writer::open(&dir.path().join("x.db")).unwrap();
        writer.fill_checked_paths(&["a.jsonl".to_owned()]).unwrap();
        let plan = crate::store::query_plan(
            &writer.conn,
            &outside_image_entries_sql(CHECKED_OUTSIDE_AGENTS_ONLY),
        );
        assert!(
            !plan
                .iter()
                .any(|line| line.contains("rowid=?)") && line.contains("path=?")),
            "{plan:#?}"
        );
        assert!(
            plan.iter()
                .any(|line| line.contains("SEARCH s EXISTS USING INTEGER PRIMARY KEY")),
            "{plan:#?}"
        );
    }
}
