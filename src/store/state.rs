//! What the database remembers about each file, for planning a sync.
//!
//! A sync that finds nothing new reads only `FileStat`s: the `files` table
//! alone, no join with `sessions` (which has 1.6 times the `files` table's
//! pages) and no cursor strings. The cursor and fingerprint of a file that
//! grew are read afterwards, one row each (`resume_point`).

use std::collections::HashMap;
use std::ffi::OsString;
use std::sync::Arc;

use rusqlite::{OptionalExtension, Row};

use super::{Result, Writer};
use crate::pipeline::{Cursor, FileStatus, SessionFacts};
use crate::read::Fingerprint;

/// What planning needs of one `files` row: its identity, stat and status.
#[derive(Debug, Clone)]
pub struct FileStat {
    pub file_id: i64,
    /// The path's bytes, as the walk finds them.
    pub path: OsString,
    /// Shared by every row of a root (a root holds thousands of files).
    pub root: Arc<str>,
    pub status: FileStatus,
    pub dev: i64,
    pub ino: i64,
    pub size: u64,
    pub mtime_ns: i64,
    pub seen_ns: i64,
    pub parser_version: i64,
}

/// One `files` row whole: its stat, and where its reading stopped.
#[derive(Debug, Clone)]
pub struct FileState {
    pub stat: FileStat,
    pub cursor: Cursor,
    pub fingerprint: Fingerprint,
}

impl Writer {
    /// Every file the database knows, sorted by the bytes of its path (the
    /// order of `discover`'s list, so the two are merged without hashing).
    pub fn file_stats(&self) -> Result<Vec<FileStat>> {
        let mut stmt = self
            .conn
            .prepare(&format!("SELECT {STAT_COLUMNS} FROM files f"))
            .map_err(self.err())?;
        let mut rows = stmt.query([]).map_err(self.err())?;
        let mut stats = Vec::new();
        let mut root: Arc<str> = Arc::from("");
        while let Some(row) = rows.next().map_err(self.err())? {
            stats.push(file_stat(row, &mut root).map_err(self.err())?);
        }
        stats.sort_unstable_by(|a, b| a.path.as_encoded_bytes().cmp(b.path.as_encoded_bytes()));
        Ok(stats)
    }

    /// Where a file's reading stopped: its cursor and the fingerprint of
    /// what was read. `None` when the file has no row (anymore).
    pub fn resume_point(&self, file_id: i64) -> Result<Option<(Cursor, Fingerprint)>> {
        self.conn
            .prepare_cached(&format!(
                "SELECT {RESUME_COLUMNS} FROM {RESUME_FROM} WHERE f.file_id = ?1"
            ))
            .and_then(|mut stmt| {
                stmt.query_row([file_id], |row| resume_at(row, 0))
                    .optional()
            })
            .map_err(self.err())
    }

    /// Every file the database knows, whole, by path (`doctor`'s re-read
    /// comparison; a sync plans from `file_stats`). Keyed by the path's
    /// bytes: `Path`'s own `Hash`/`Eq` walk components.
    pub fn file_states(&self) -> Result<HashMap<OsString, FileState>> {
        let sql = format!("SELECT {STAT_COLUMNS}, {RESUME_COLUMNS} FROM {RESUME_FROM}");
        let mut stmt = self.conn.prepare(&sql).map_err(self.err())?;
        let mut rows = stmt.query([]).map_err(self.err())?;
        let mut states = HashMap::new();
        let mut root: Arc<str> = Arc::from("");
        while let Some(row) = rows.next().map_err(self.err())? {
            let state = file_state(row, &mut root).map_err(self.err())?;
            states.insert(state.stat.path.clone(), state);
        }
        Ok(states)
    }
}

/// The columns `file_stat` reads, in its order, from `files f`.
const STAT_COLUMNS: &str = "f.file_id, f.path, f.root, f.status, f.skip_reason, f.dev, f.ino,
     f.size, f.mtime_ns, f.seen_ns, f.parser_version";
const STAT_COLUMN_COUNT: usize = 11;

/// The columns `resume_at` reads, in its order, from `RESUME_FROM`.
const RESUME_COLUMNS: &str = "f.offset, f.line_count, f.object_count, f.tail_open,
     f.last_entry_id, f.head_len, f.head_hash, f.anchor_hash,
     s.session_id, s.version, s.entry_count";
const RESUME_FROM: &str = "files f LEFT JOIN sessions s ON s.file_id = f.file_id";

/// One row of `file_stats`' query. `root` is the previous row's root, kept
/// (and shared) when this row has the same one.
fn file_stat(row: &Row<'_>, root: &mut Arc<str>) -> rusqlite::Result<FileStat> {
    let this_root = row.get_ref(2)?.as_str()?;
    if **root != *this_root {
        *root = Arc::from(this_root);
    }
    let status = match row.get_ref(3)?.as_str()? {
        "indexed" => FileStatus::Indexed,
        other => FileStatus::stored(other, row.get(4)?),
    };
    Ok(FileStat {
        file_id: row.get(0)?,
        path: OsString::from(row.get_ref(1)?.as_str()?),
        root: Arc::clone(root),
        status,
        dev: row.get::<_, Option<i64>>(5)?.unwrap_or(0),
        ino: row.get::<_, Option<i64>>(6)?.unwrap_or(0),
        size: row.get::<_, i64>(7)?.max(0) as u64,
        mtime_ns: row.get::<_, Option<i64>>(8)?.unwrap_or(0),
        seen_ns: row.get::<_, Option<i64>>(9)?.unwrap_or(0),
        parser_version: row.get(10)?,
    })
}

/// One row of `file_states`' query: `file_stat`'s columns, then
/// `resume_at`'s.
fn file_state(row: &Row<'_>, root: &mut Arc<str>) -> rusqlite::Result<FileState> {
    let (cursor, fingerprint) = resume_at(row, STAT_COLUMN_COUNT)?;
    Ok(FileState {
        stat: file_stat(row, root)?,
        cursor,
        fingerprint,
    })
}

/// Where a file's reading stopped, from `RESUME_COLUMNS` read from the
/// row's column `first` on.
fn resume_at(row: &Row<'_>, first: usize) -> rusqlite::Result<(Cursor, Fingerprint)> {
    let at = |column: usize| first + column;
    let session_id: Option<String> = row.get(at(8))?;
    let version: Option<i64> = row.get(at(9))?;
    let cursor = Cursor {
        offset: row.get::<_, i64>(at(0))?.max(0) as u64,
        line_count: row.get(at(1))?,
        object_count: row.get(at(2))?,
        tail_open: row.get(at(3))?,
        last_entry_id: row.get(at(4))?,
        session: session_id.map(|session_id| SessionFacts {
            session_id,
            legacy_v1: version.unwrap_or(1) < 2,
        }),
        entry_count: row.get::<_, Option<i64>>(at(10))?.unwrap_or(0),
    };
    let fingerprint = Fingerprint {
        head_len: row.get::<_, i64>(at(5))?.max(0) as u64,
        head_hash: row.get::<_, Option<i64>>(at(6))?.unwrap_or(0),
        anchor_hash: row.get::<_, Option<i64>>(at(7))?.unwrap_or(0),
    };
    Ok((cursor, fingerprint))
}
