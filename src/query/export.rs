//! `piidx export`: a Pi session file rebuilt from the database alone.
//!
//! The header's stored JSON, then every entry's stored JSON in file order,
//! with image payloads put back from `blobs` (base64 re-encoded when they
//! were decoded on the way in) at their place among their object's keys,
//! and shared texts (a system message's sections) put back the same way.
//! Numbers are kept as written, so a line Pi wrote (`JSON.stringify`) comes
//! back byte for byte; any other line comes back JSON-equal.
//! Lines Pi could not parse, duplicate header lines and glued objects are
//! not entries of the session and are not written. An oh-my-pi session
//! starts with its title slot as it is now (omp's own format: the slot, then
//! the header).

use std::io::Write;

use serde_json::Value;

use super::tree::{SessionRef, ViewError};
use crate::store::{Index, restore_entry};

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    View(#[from] ViewError),
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    #[error("entry {entry}: stored JSON does not parse; run `piidx doctor --fix`")]
    BadRaw {
        entry: String,
        source: serde_json::Error,
    },
    #[error("entry {entry}: image path {path} not found in the stored JSON")]
    BadImagePath { entry: String, path: String },
    #[error("cannot write the export")]
    Io(#[from] std::io::Error),
}

/// Writes the session as JSONL to `out`; returns the number of entry lines.
pub fn export(
    store: &Index,
    session: &SessionRef,
    out: &mut dyn Write,
) -> Result<u64, ExportError> {
    export_in(store, session, None, out)
}

/// `export`, with the header's `cwd` replaced by `cwd` when given: a
/// session rebuilt to be resumed on a machine without its old directory
/// (Pi opens it only in a directory that exists).
pub fn export_in(
    store: &Index,
    session: &SessionRef,
    cwd: Option<&str>,
    out: &mut dyn Write,
) -> Result<u64, ExportError> {
    let conn = store.connection();
    let (mut header, title_slot): (String, Option<String>) = conn.query_row(
        "SELECT header_raw, title_slot FROM sessions WHERE file_id = ?1",
        [session.file_id],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    if let Some(cwd) = cwd {
        let mut value: Value =
            serde_json::from_str(&header).map_err(|source| ExportError::BadRaw {
                entry: "header".to_owned(),
                source,
            })?;
        if let Some(object) = value.as_object_mut() {
            object.insert("cwd".to_owned(), Value::from(cwd));
        }
        header = value.to_string();
    }
    if let Some(slot) = title_slot {
        out.write_all(slot.as_bytes())?;
        out.write_all(b"\n")?;
    }
    out.write_all(header.as_bytes())?;
    out.write_all(b"\n")?;
    let mut stmt = conn.prepare(
        "SELECT e.entry_rowid, e.entry_id, e.raw,
                EXISTS (SELECT 1 FROM images i WHERE i.entry_rowid = e.entry_rowid)
                OR EXISTS (SELECT 1 FROM shared_refs r WHERE r.entry_rowid = e.entry_rowid)
           FROM entries e WHERE e.file_id = ?1 AND e.glued = 0
          ORDER BY e.line_no, e.obj_in_line",
    )?;
    let mut rows = stmt.query([session.file_id])?;
    let mut count = 0;
    while let Some(row) = rows.next()? {
        let rowid: i64 = row.get(0)?;
        let entry: String = row.get(1)?;
        let raw: String = row.get(2)?;
        let cut_out: bool = row.get(3)?;
        if !cut_out {
            out.write_all(raw.as_bytes())?;
        } else {
            let mut value: Value =
                serde_json::from_str(&raw).map_err(|source| ExportError::BadRaw {
                    entry: entry.clone(),
                    source,
                })?;
            restore_entry(conn, rowid, &mut value, true)?
                .map_err(|path| ExportError::BadImagePath { entry, path })?;
            serde_json::to_writer(&mut *out, &value).map_err(std::io::Error::from)?;
        }
        out.write_all(b"\n")?;
        count += 1;
    }
    Ok(count)
}
