//! A chunk's text, read from the index for the hits that need it: cut out
//! of its entry's JSON (`scan_raw`, reading `entries.raw` only as far as the
//! chunk's window), or through the `fts_content` view. Both the scan (`scan`)
//! and the snippets (`snippet`) read chunks this way; neither imports the
//! other.

use rusqlite::OptionalExtension;

use super::chunk_text;

/// The text of one chunk: cut out of the entry's JSON by `chunk_text`, or
/// by the `fts_content` view (which parses the whole entry) when that scan
/// does not find it. `None` when the chunk is gone.
pub(super) fn chunk_body(
    conn: &rusqlite::Connection,
    chunk_id: i64,
) -> rusqlite::Result<Option<String>> {
    let chunk = conn
        .prepare_cached(
            "SELECT entry_rowid, json_path, start, len, fts_rowid IS NOT NULL
               FROM chunks WHERE chunk_id = ?1",
        )?
        .query_row([chunk_id], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, String>(1)?,
                usize::try_from(row.get::<_, i64>(2)?).ok(),
                usize::try_from(row.get::<_, i64>(3)?).ok(),
                row.get::<_, bool>(4)?,
            ))
        })
        .optional()?;
    let Some((entry_rowid, json_path, start, len, shared)) = chunk else {
        return Ok(None);
    };
    // A shared text's chunk is not in the entry's JSON: the view reads it.
    let scanned = match (start, len) {
        (Some(start), Some(len)) if !shared => scan_raw(conn, entry_rowid, &json_path, start, len),
        _ => None,
    };
    match scanned {
        Some(text) => Ok(Some(text)),
        None => conn
            .prepare_cached("SELECT body FROM fts_content WHERE chunk_id = ?1")?
            .query_row([chunk_id], |row| row.get(0))
            .optional()
            .map(Option::flatten),
    }
}

/// Reads `entries.raw` only as far as the chunk's window needs: escapes
/// only lengthen text, so the window ends at least `start + len` bytes in.
/// That much and a margin is read first, the rest only if it was short.
/// Any failure (the row is gone, the JSON is not as expected) is `None`.
pub(super) fn scan_raw(
    conn: &rusqlite::Connection,
    entry_rowid: i64,
    json_path: &str,
    start: usize,
    len: usize,
) -> Option<String> {
    let blob = conn
        .blob_open(rusqlite::MAIN_DB, "entries", "raw", entry_rowid, true)
        .ok()?;
    let size = blob.len();
    let first = size.min(start.saturating_add(len).saturating_mul(9) / 8 + 64 * 1024);
    let mut raw = vec![0; first];
    blob.read_at_exact(&mut raw, 0).ok()?;
    if let Some(text) = chunk_text::span_text(&raw, json_path, start, len) {
        return Some(text);
    }
    if first == size {
        return None;
    }
    raw.resize(size, 0);
    blob.read_at_exact(&mut raw[first..], first).ok()?;
    chunk_text::span_text(&raw, json_path, start, len)
}
