//! What the database remembers about each file, for planning a sync.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;

use rusqlite::Row;

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

impl Writer {
    /// Every file the database knows, by path. Keyed by the path's bytes:
    /// `Path`'s own `Hash`/`Eq` walk components, which was a third of a
    /// no-change sync over 10,000 files.
    pub fn file_states(&self) -> Result<HashMap<OsString, FileState>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT f.file_id, f.path, f.root, f.status, f.dev, f.ino, f.size, f.mtime_ns,
                        f.parser_version, f.offset, f.line_count, f.object_count, f.tail_open,
                        f.last_entry_id, f.head_len, f.head_hash, f.anchor_hash,
                        s.session_id, s.version, s.entry_count, f.seen_ns, f.skip_reason
                 FROM files f LEFT JOIN sessions s ON s.file_id = f.file_id",
            )
            .map_err(self.err())?;
        let rows = stmt.query_map([], file_state).map_err(self.err())?;
        let mut states = HashMap::new();
        for row in rows {
            let state = row.map_err(self.err())?;
            states.insert(state.path.clone().into_os_string(), state);
        }
        Ok(states)
    }
}

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
