//! `piidx export`: a Pi session file rebuilt from the database alone.
//!
//! The header's stored JSON, then every entry's stored JSON in file order,
//! with image payloads put back from `blobs` (base64 re-encoded when they
//! were decoded on the way in) at their place among their object's keys,
//! and shared texts (a system message's sections) put back the same way.
//! Numbers are kept as written, so a line Pi wrote (`JSON.stringify`) comes
//! back byte for byte. A line its objects cannot give back (glued objects
//! with something between them, `\r\n`, lone surrogate escapes, invalid
//! UTF-8, space around the object) was kept whole in `exact_lines` and is
//! written as it was; glued objects with nothing between them are written
//! one after another on their line. So every line the index recovered
//! comes back byte for byte, in order; any other line comes back JSON-equal.
//! Lines that held no entry (blank, unparsable, duplicate headers, a torn
//! tail not yet complete) are not written. An oh-my-pi session starts with
//! its title slot as it is now (omp's own format: the slot, then the
//! header).

use std::collections::HashMap;
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
    let mut exact: HashMap<i64, (bool, Vec<u8>)> = HashMap::new();
    {
        let mut stmt =
            conn.prepare("SELECT byte_offset, header, bytes FROM exact_lines WHERE file_id = ?1")?;
        let mut rows = stmt.query([session.file_id])?;
        while let Some(row) = rows.next()? {
            exact.insert(row.get(0)?, (row.get(1)?, row.get(2)?));
        }
    }
    if let Some(slot) = title_slot {
        out.write_all(slot.as_bytes())?;
        out.write_all(b"\n")?;
    }
    // The header's line as it was, unless the header is rewritten.
    let header_line = exact
        .iter()
        .find(|(_, (is_header, _))| *is_header && cwd.is_none())
        .map(|(offset, (_, bytes))| (*offset, bytes));
    match header_line {
        Some((_, bytes)) => out.write_all(bytes)?,
        None => out.write_all(header.as_bytes())?,
    }
    out.write_all(b"\n")?;
    let header_offset = header_line.map(|(offset, _)| offset);
    let mut stmt = conn.prepare(
        "SELECT e.entry_rowid, e.entry_id, e.raw,
                EXISTS (SELECT 1 FROM images i WHERE i.entry_rowid = e.entry_rowid)
                OR EXISTS (SELECT 1 FROM shared_refs r WHERE r.entry_rowid = e.entry_rowid),
                e.byte_offset
           FROM entries e WHERE e.file_id = ?1
          ORDER BY e.line_no, e.obj_in_line",
    )?;
    let mut rows = stmt.query([session.file_id])?;
    let mut count = 0;
    // The line being written: its offset, and whether it came whole.
    let mut open: Option<(i64, bool)> = None;
    while let Some(row) = rows.next()? {
        let offset: i64 = row.get(4)?;
        count += 1;
        if Some(offset) == header_offset {
            continue;
        }
        match open {
            Some((line, whole)) if line == offset => {
                if whole {
                    continue;
                }
            }
            _ => {
                if open.is_some() {
                    out.write_all(b"\n")?;
                }
                let whole = match exact.get(&offset) {
                    Some((false, bytes)) => {
                        out.write_all(bytes)?;
                        true
                    }
                    _ => false,
                };
                open = Some((offset, whole));
                if whole {
                    continue;
                }
            }
        }
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
            restore_entry(conn, rowid, &mut value, true)?.map_err(|err| {
                ExportError::BadImagePath {
                    entry,
                    path: err.json_path,
                }
            })?;
            serde_json::to_writer(&mut *out, &value).map_err(std::io::Error::from)?;
        }
    }
    if open.is_some() {
        out.write_all(b"\n")?;
    }
    Ok(count)
}
