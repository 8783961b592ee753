//! What the database remembers about each file, for planning a sync.
//!
//! A sync that finds nothing new reads only `FileStat`s: the `files` table
//! alone, no join with `sessions` (which has 1.6 times the `files` table's
//! pages) and no cursor strings. The cursor and fingerprint of a file that
//! grew are read afterwards, one row each (`resume_point`).

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::rc::Rc;

use rusqlite::{OptionalExtension, Row};

use super::{Result, Writer};
use crate::pipeline::{Cursor, FileStatus, SessionFacts};
use crate::read::Fingerprint;

/// One `files` row, with the cursor needed to resume it.
#[derive(Debug, Clone)]
pub struct FileState {
    pub file_id: i64,
    pub path: PathBuf,
    pub root: String,
    pub status: FileStatus,
    pub dev: i64,
    pub ino: i64,
    pub size: u64,
    pub mtime_ns: i64,
    pub seen_ns: i64,
    pub parser_version: i64,
    pub cursor: Cursor,
    pub fingerprint: Fingerprint,
}

/// What planning needs of one `files` row: its identity, stat and status.
#[derive(Debug, Clone)]
pub struct FileStat {
    pub file_id: i64,
    /// The path's bytes, as the walk finds them.
    pub path: OsString,
    /// Shared by every row of a root (a root holds thousands of files).
    pub root: Rc<str>,
    pub status: FileStatus,
    pub dev: i64,
    pub ino: i64,
    pub size: u64,
    pub mtime_ns: i64,
    pub seen_ns: i64,
    pub parser_version: i64,
}

impl Writer {
    /// Every file the database knows, sorted by the bytes of its path (the
    /// order of `discover`'s list, so the two are merged without hashing).
    pub fn file_stats(&self) -> Result<Vec<FileStat>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT file_id, path, root, status, skip_reason, dev, ino, size, mtime_ns,
                        seen_ns, parser_version
                 FROM files",
            )
            .map_err(self.err())?;
        let mut rows = stmt.query([]).map_err(self.err())?;
        let mut stats = Vec::new();
        let mut root: Rc<str> = Rc::from("");
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
            .prepare_cached(&format!("{STATE_SELECT} WHERE f.file_id = ?1"))
            .and_then(|mut stmt| stmt.query_row([file_id], file_state).optional())
            .map(|state| state.map(|state| (state.cursor, state.fingerprint)))
            .map_err(self.err())
    }

    /// Every file the database knows, whole, by path (`doctor`'s re-read
    /// comparison; a sync plans from `file_stats`). Keyed by the path's
    /// bytes: `Path`'s own `Hash`/`Eq` walk components.
    pub fn file_states(&self) -> Result<HashMap<OsString, FileState>> {
        let mut stmt = self.conn.prepare(STATE_SELECT).map_err(self.err())?;
        let rows = stmt.query_map([], file_state).map_err(self.err())?;
        let mut states = HashMap::new();
        for row in rows {
            let state = row.map_err(self.err())?;
            states.insert(state.path.clone().into_os_string(), state);
        }
        Ok(states)
    }
}

/// One row of `file_stats`' query. `root` is the previous row's root, kept
/// (and shared) when this row has the same one.
fn file_stat(row: &Row<'_>, root: &mut Rc<str>) -> rusqlite::Result<FileStat> {
    let this_root = row.get_ref(2)?.as_str()?;
    if **root != *this_root {
        *root = Rc::from(this_root);
    }
    let status = match row.get_ref(3)?.as_str()? {
        "indexed" => FileStatus::Indexed,
        other => FileStatus::stored(other, row.get(4)?),
    };
    Ok(FileStat {
        file_id: row.get(0)?,
        path: OsString::from(row.get_ref(1)?.as_str()?),
        root: Rc::clone(root),
        status,
        dev: row.get::<_, Option<i64>>(5)?.unwrap_or(0),
        ino: row.get::<_, Option<i64>>(6)?.unwrap_or(0),
        size: row.get::<_, i64>(7)?.max(0) as u64,
        mtime_ns: row.get::<_, Option<i64>>(8)?.unwrap_or(0),
        seen_ns: row.get::<_, Option<i64>>(9)?.unwrap_or(0),
        parser_version: row.get(10)?,
    })
}

/// A whole `FileState` per row (`file_state` reads the columns by place).
const STATE_SELECT: &str =
    "SELECT f.file_id, f.path, f.root, f.status, f.dev, f.ino, f.size, f.mtime_ns,
        f.parser_version, f.offset, f.line_count, f.object_count, f.tail_open,
        f.last_entry_id, f.head_len, f.head_hash, f.anchor_hash,
        s.session_id, s.version, s.entry_count, f.seen_ns, f.skip_reason
 FROM files f LEFT JOIN sessions s ON s.file_id = f.file_id";

fn file_state(row: &Row<'_>) -> rusqlite::Result<FileState> {
    let session_id: Option<String> = row.get(17)?;
    let version: Option<i64> = row.get(18)?;
    Ok(FileState {
        file_id: row.get(0)?,
        path: PathBuf::from(row.get::<_, String>(1)?),
        root: row.get(2)?,
        status: FileStatus::stored(&row.get::<_, String>(3)?, row.get(21)?),
        dev: row.get::<_, Option<i64>>(4)?.unwrap_or(0),
        ino: row.get::<_, Option<i64>>(5)?.unwrap_or(0),
        size: row.get::<_, i64>(6)?.max(0) as u64,
        mtime_ns: row.get::<_, Option<i64>>(7)?.unwrap_or(0),
        seen_ns: row.get::<_, Option<i64>>(20)?.unwrap_or(0),
        parser_version: row.get(8)?,
        cursor: Cursor {
            offset: row.get::<_, i64>(9)?.max(0) as u64,
            line_count: row.get(10)?,
            object_count: row.get(11)?,
            tail_open: row.get(12)?,
            last_entry_id: row.get(13)?,
            session: session_id.map(|session_id| SessionFacts {
                session_id,
                legacy_v1: version.unwrap_or(1) < 2,
            }),
            entry_count: row.get::<_, Option<i64>>(19)?.unwrap_or(0),
        },
        fingerprint: Fingerprint {
            head_len: row.get::<_, i64>(14)?.max(0) as u64,
            head_hash: row.get::<_, Option<i64>>(15)?.unwrap_or(0),
            anchor_hash: row.get::<_, Option<i64>>(16)?.unwrap_or(0),
        },
    })
}
