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
//!
//! pi_agent_rust sessions have a second format of the port's own, a SQLite
//! file (`export_port_sqlite`, for an output path ending in `.sqlite`); and
//! a SQLite session written as JSONL has its attachments put back inline
//! (`export_port_jsonl`), since their bytes were rows of the source file.

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
    #[error("cannot write the pi_agent_rust SQLite session")]
    PortSqlite(#[from] crate::store::port_sqlite::PortSqliteError),
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

/// True when `session` is a pi_agent_rust SQLite session file, whose
/// attachments are rows of its own database.
pub fn is_port_sqlite(session: &SessionRef) -> bool {
    session.path.ends_with(".sqlite")
}

/// The JSONL lines of `export`: the header's, then each entry's.
fn lines(store: &Index, session: &SessionRef) -> Result<Vec<Vec<u8>>, ExportError> {
    let mut buffer = Vec::new();
    export(store, session, &mut buffer)?;
    Ok(buffer
        .split(|byte| *byte == b'\n')
        .filter(|line| !line.is_empty())
        .map(<[u8]>::to_vec)
        .collect())
}

/// The bytes of every `$piBlob` attachment of `entry` that its session
/// keeps, by reference.
fn attachments(
    session: &SessionRef,
    entry: &Value,
) -> Vec<(crate::outside::BlobRef, Option<Vec<u8>>)> {
    let file = std::path::Path::new(&session.path);
    crate::outside::entry_refs(entry)
        .into_iter()
        .filter(|(_, reference)| matches!(reference, crate::outside::BlobRef::Port { .. }))
        .map(|(_, reference)| {
            let bytes = crate::outside::read(file, &reference);
            (reference, bytes)
        })
        .collect()
}

/// An attachment's digest (hex) and its bytes, `None` when they are not
/// where its session keeps them.
pub type Attachment = (String, Option<Vec<u8>>);

/// Every attachment a pi_agent_rust session references (`$piBlob`), once
/// each: its digest's hex and its bytes from where the session keeps them
/// (`None` when they are not there). The port writes them beside a JSONL
/// file as `<file>.blobs/<hex>` (its `session/attachments.rs`), which is
/// where `piidx export -o FILE` puts them.
pub fn port_attachments(
    store: &Index,
    session: &SessionRef,
) -> Result<Vec<Attachment>, ExportError> {
    let mut seen = std::collections::HashSet::new();
    let mut found = Vec::new();
    for line in lines(store, session)?.into_iter().skip(1) {
        if !line.windows(8).any(|w| w == b"\"$piBlob") {
            continue;
        }
        let Ok(entry) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        for (reference, bytes) in attachments(session, &entry) {
            if seen.insert(reference.hex().to_owned()) {
                found.push((reference.hex().to_owned(), bytes));
            }
        }
    }
    Ok(found)
}

/// `export` of a pi_agent_rust SQLite session as JSONL with nowhere to put
/// its attachments (standard output): its `$piBlob` references point at
/// rows of the source database (`pi_session_blobs`), so each is put back
/// inline as the port's `decode_entry` reads it (base64 in the reference's
/// `encoding`). Lines without one are written as stored. Returns the entry
/// lines written and the attachments whose bytes were not there (left as
/// references).
pub fn export_port_jsonl(
    store: &Index,
    session: &SessionRef,
    out: &mut dyn Write,
) -> Result<(u64, u64), ExportError> {
    let (mut count, mut missing) = (0, 0);
    for (index, line) in lines(store, session)?.into_iter().enumerate() {
        let parsed = (index > 0 && line.windows(8).any(|w| w == b"\"$piBlob"))
            .then(|| serde_json::from_slice::<Value>(&line).ok())
            .flatten();
        match parsed {
            Some(mut entry) => {
                missing += hydrate(session, &mut entry);
                serde_json::to_writer(&mut *out, &entry).map_err(std::io::Error::from)?;
            }
            None => out.write_all(&line)?,
        }
        out.write_all(b"\n")?;
        count += u64::from(index > 0);
    }
    Ok((count, missing))
}

/// Puts the bytes of each `$piBlob` image or media block of `entry` back
/// as base64 (`message.content[i].data`); returns how many were missing.
fn hydrate(session: &SessionRef, entry: &mut Value) -> u64 {
    use base64::Engine;
    let mut found = attachments(session, entry).into_iter();
    let Some(Value::Array(blocks)) = entry
        .get_mut("message")
        .and_then(|message| message.get_mut("content"))
    else {
        return 0;
    };
    let mut missing = 0;
    for block in blocks {
        if crate::outside::blob_ref(block).is_none() {
            continue;
        }
        let Some((_, bytes)) = found.next() else {
            break;
        };
        let Some(bytes) = bytes else {
            missing += 1;
            continue;
        };
        let no_pad = block
            .get("data")
            .and_then(|data| data.get("encoding"))
            .and_then(Value::as_str)
            == Some("base64NoPad");
        let text = if no_pad {
            base64::engine::general_purpose::STANDARD_NO_PAD.encode(&bytes)
        } else {
            base64::engine::general_purpose::STANDARD.encode(&bytes)
        };
        if let Some(object) = block.as_object_mut() {
            object.insert("data".to_owned(), Value::String(text));
        }
    }
    missing
}

/// Writes the pi_agent_rust session `session` (a JSONL or a SQLite one) in
/// the port's SQLite format at `path`: the header and entries as stored
/// (attachments as `$piBlob` references), each referenced attachment a
/// `pi_session_blobs` row, and `pi_session_meta` as the port computes it
/// (`message_count`: every `message` entry; `name`: the last
/// `session_info` with a name). Returns the entries written and the
/// attachments whose bytes were not there.
pub fn export_port_sqlite(
    store: &Index,
    session: &SessionRef,
    path: &std::path::Path,
) -> Result<(u64, u64), ExportError> {
    let mut lines = lines(store, session)?.into_iter();
    let header_line = lines.next().unwrap_or_default();
    let header = String::from_utf8_lossy(&header_line).into_owned();
    let header_value: Value =
        serde_json::from_str(&header).map_err(|source| ExportError::BadRaw {
            entry: "header".to_owned(),
            source,
        })?;
    let mut written = crate::store::port_sqlite::PortSession {
        id: header_value
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or(&session.session_id)
            .to_owned(),
        header,
        ..Default::default()
    };
    let mut missing = 0;
    for line in lines {
        let text = String::from_utf8_lossy(&line).into_owned();
        if let Ok(entry) = serde_json::from_str::<Value>(&text) {
            match entry.get("type").and_then(Value::as_str) {
                Some("message") => written.message_count += 1,
                Some("session_info") => {
                    if let Some(name) = entry.get("name").and_then(Value::as_str) {
                        written.name = Some(name.to_owned());
                    }
                }
                _ => {}
            }
            for (reference, bytes) in attachments(session, &entry) {
                match bytes {
                    Some(bytes) => written
                        .blobs
                        .push((format!("sha256:{}", reference.hex()), bytes)),
                    None => missing += 1,
                }
            }
        }
        written.entries.push(text);
    }
    crate::store::port_sqlite::write_port_session(path, &written)?;
    Ok((written.entries.len() as u64, missing))
}
