//! `piidx export`: a Pi session file rebuilt from the database alone.
//!
//! The header's stored JSON, then every entry's stored JSON in file order,
//! with image payloads put back from `blobs` (base64 re-encoded when they
//! were decoded on the way in) at their place among their object's keys.
//! Numbers are kept as written, so a line Pi wrote (`JSON.stringify`) comes
//! back byte for byte; any other line comes back JSON-equal.
//! Lines Pi could not parse, duplicate header lines and glued objects are
//! not entries of the session and are not written.

use std::io::Write;

use base64::Engine;
use serde_json::Value;

use super::tree::{SessionRef, ViewError};
use crate::store::Store;

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    View(#[from] ViewError),
    #[error("{0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("entry {entry}: stored JSON does not parse: {source}")]
    BadRaw {
        entry: String,
        source: serde_json::Error,
    },
    #[error("entry {entry}: image path {path} not found in the stored JSON")]
    BadImagePath { entry: String, path: String },
    #[error("writing the export: {0}")]
    Io(#[from] std::io::Error),
}

/// Writes the session as JSONL to `out`; returns the number of entry lines.
pub fn export(
    store: &Store,
    session: &SessionRef,
    out: &mut dyn Write,
) -> Result<u64, ExportError> {
    let conn = store.connection();
    let header: String = conn.query_row(
        "SELECT header_raw FROM sessions WHERE file_id = ?1",
        [session.file_id],
        |row| row.get(0),
    )?;
    out.write_all(header.as_bytes())?;
    out.write_all(b"\n")?;
    let mut stmt = conn.prepare(
        "SELECT e.entry_rowid, e.entry_id, e.raw,
                EXISTS (SELECT 1 FROM images i WHERE i.entry_rowid = e.entry_rowid)
           FROM entries e WHERE e.file_id = ?1 AND e.glued = 0
          ORDER BY e.line_no, e.obj_in_line",
    )?;
    let mut images = conn.prepare(
        "SELECT i.json_path, i.payload_key, b.encoding, b.data, i.payload_index
           FROM images i JOIN blobs b ON b.hash = i.hash WHERE i.entry_rowid = ?1",
    )?;
    let mut rows = stmt.query([session.file_id])?;
    let mut count = 0;
    while let Some(row) = rows.next()? {
        let rowid: i64 = row.get(0)?;
        let entry: String = row.get(1)?;
        let raw: String = row.get(2)?;
        let has_images: bool = row.get(3)?;
        if !has_images {
            out.write_all(raw.as_bytes())?;
        } else {
            let mut value: Value =
                serde_json::from_str(&raw).map_err(|source| ExportError::BadRaw {
                    entry: entry.clone(),
                    source,
                })?;
            let mut payloads = images.query([rowid])?;
            while let Some(image) = payloads.next()? {
                let path: String = image.get(0)?;
                let key: String = image.get(1)?;
                let encoding: String = image.get(2)?;
                let data: Vec<u8> = image.get(3)?;
                let index: Option<i64> = image.get(4)?;
                let payload = if encoding == "base64" {
                    base64::engine::general_purpose::STANDARD.encode(&data)
                } else {
                    String::from_utf8_lossy(&data).into_owned()
                };
                let target = json_path_mut(&mut value, &path)
                    .and_then(Value::as_object_mut)
                    .ok_or_else(|| ExportError::BadImagePath {
                        entry: entry.clone(),
                        path: path.clone(),
                    })?;
                let index = index.map_or(target.len(), |i| (i.max(0) as usize).min(target.len()));
                target.shift_insert(index, key, Value::String(payload));
            }
            serde_json::to_writer(&mut *out, &value).map_err(std::io::Error::from)?;
        }
        out.write_all(b"\n")?;
        count += 1;
    }
    Ok(count)
}

/// The value at a SQLite JSON path as the normalizer writes them: `$`, then
/// `.key`, `."quoted key"` or `[index]` steps.
pub fn json_path_mut<'a>(value: &'a mut Value, path: &str) -> Option<&'a mut Value> {
    let mut rest = path.strip_prefix('$')?;
    let mut current = value;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']')?;
            let index: usize = after[..end].parse().ok()?;
            current = current.get_mut(index)?;
            rest = &after[end + 1..];
        } else if let Some(after) = rest.strip_prefix(".\"") {
            let end = after.find('"')?;
            current = current.get_mut(&after[..end])?;
            rest = &after[end + 1..];
        } else if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            current = current.get_mut(&after[..end])?;
            rest = &after[end..];
        } else {
            return None;
        }
    }
    Some(current)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_paths_resolve() {
        let mut value: Value =
            serde_json::json!({"message": {"content": [{"a": 1}, {"x y": {"k": 2}}]}});
        assert_eq!(
            json_path_mut(&mut value, "$.message.content[1].\"x y\".k"),
            Some(&mut Value::from(2))
        );
        assert!(json_path_mut(&mut value, "$.message.content[5]").is_none());
    }
}
