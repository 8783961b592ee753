//! Reading chunk text straight out of `entries.raw`, for what the full-text
//! index cannot answer: `--substring` (and unspaced-script terms shorter
//! than a trigram) tests the candidate chunks' text in Rust, newest first
//! (`scan_chunks`, with `FieldCache` so that each entry is read and each
//! field decoded once), and a hit's text is read only as far as its window
//! (`body::scan_raw`). The `fts_content` view would parse the whole entry and
//! decode the whole field for every chunk: milliseconds per chunk of a
//! multi-MB tool output.

use rusqlite::OptionalExtension;
use rusqlite::types::Value as SqlValue;

use super::SearchError;
use super::body::chunk_body;
use super::chunk_text;
use super::weigh::Ranked;

/// Stage 1 of a scan (`--substring`, short CJK terms): the SQL lists the
/// candidate chunks newest first, with the filters applied; here each one's
/// text is tested for every term, as `instr(lower(text), lower(term))` would
/// (SQLite's `lower` folds ASCII only), until `fetch` chunks match. Chunks
/// of one field come one after another, so each entry is read and each
/// field decoded once: through `fts_content`, a multi-MB field was parsed
/// again for every one of its chunks.
pub(super) fn scan_chunks(
    conn: &rusqlite::Connection,
    sql: &str,
    params: &[SqlValue],
    terms: &[String],
    fetch: usize,
) -> Result<Vec<Ranked>, SearchError> {
    let needles: Vec<memchr::memmem::Finder> = terms
        .iter()
        .map(|term| memchr::memmem::Finder::new(term.to_ascii_lowercase().as_bytes()).into_owned())
        .collect();
    // A scan reads most of the main file. Mapped, its pages are read in
    // place, not copied out of the OS page cache by a `pread` each (a full
    // scan of 1 GB: 1.0 → 0.7 s). A ranked search reads a few hundred pages,
    // for which mapping the file cost more than it saved. Only the main file:
    // without a schema name the limit would apply to the shards too.
    conn.pragma_update(Some("main"), "mmap_size", i64::MAX)?;
    let mut stmt = conn.prepare(sql)?;
    // serde_json writes every character as itself except `"`, `\` and
    // control characters. A term without those occurs in an entry's text
    // only if it occurs in its JSON: one search of the JSON rules out an
    // entry without decoding any of its strings.
    let plain = terms
        .iter()
        .all(|term| !term.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20));
    let mut rows = stmt.query(rusqlite::params_from_iter(params))?;
    let mut field = FieldCache::default();
    let mut found = Vec::new();
    while let Some(row) = rows.next()? {
        let chunk_id: i64 = row.get(0)?;
        let entry_rowid: i64 = row.get(1)?;
        // A shared text's chunk: its text is not in the entry's JSON.
        let shared: bool = row.get(6)?;
        if !shared && plain && !field.entry_holds(conn, entry_rowid, &needles)? {
            continue;
        }
        let span = (row.get::<_, i64>(4)?, row.get::<_, i64>(5)?);
        let scanned = if shared {
            None
        } else {
            field.span(conn, entry_rowid, &row.get::<_, String>(3)?, span)?
        };
        let text = match scanned {
            Some(text) => text,
            None => chunk_body(conn, chunk_id)?.unwrap_or_default(),
        };
        let lower = text.to_ascii_lowercase();
        if needles
            .iter()
            .all(|needle| needle.find(lower.as_bytes()).is_some())
        {
            found.push(Ranked {
                chunk_id,
                entry_rowid,
                score: 0.0,
                timestamp_ms: row.get(2)?,
            });
            if found.len() == fetch {
                break;
            }
        }
    }
    Ok(found)
}

/// An entry's JSON, as bytes.
const RAW_OF_ENTRY: &str = "SELECT CAST(raw AS BLOB) FROM entries WHERE entry_rowid = ?1";

/// The last entry read and the last string field decoded by `scan_chunks`.
#[derive(Default)]
struct FieldCache {
    entry: Option<(i64, Vec<u8>)>,
    /// Entry, path and decoded text (`None` when it could not be decoded,
    /// so that a field's other chunks do not try again).
    field: Option<(i64, String, Option<String>)>,
    /// Whether the entry's JSON, ASCII-lowercased, holds every term.
    holds: Option<(i64, bool)>,
    /// The last entry's JSON, ASCII-lowercased (kept for its capacity).
    lower: Vec<u8>,
}

impl FieldCache {
    /// Whether every needle occurs in the entry's JSON (ASCII case folded).
    fn entry_holds(
        &mut self,
        conn: &rusqlite::Connection,
        entry_rowid: i64,
        needles: &[memchr::memmem::Finder],
    ) -> rusqlite::Result<bool> {
        if let Some((rowid, holds)) = self.holds
            && rowid == entry_rowid
        {
            return Ok(holds);
        }
        // Lowercased straight out of SQLite's buffer: most entries are
        // ruled out here, and never copied whole. One that holds every term
        // is kept, as its chunks are decoded next.
        let (lower, kept) = (&mut self.lower, &mut self.entry);
        lower.clear();
        let holds = conn
            .prepare_cached(RAW_OF_ENTRY)?
            .query_row([entry_rowid], |row| {
                let raw = row.get_ref(0)?.as_bytes_or_null()?.unwrap_or_default();
                lower.extend(raw.iter().map(u8::to_ascii_lowercase));
                let holds = needles.iter().all(|needle| needle.find(lower).is_some());
                if holds {
                    *kept = Some((entry_rowid, raw.to_vec()));
                }
                Ok(holds)
            })
            .optional()?
            .unwrap_or(false);
        self.holds = Some((entry_rowid, holds));
        Ok(holds)
    }

    /// The entry's JSON, read once however many of its chunks ask.
    fn raw(&mut self, conn: &rusqlite::Connection, entry_rowid: i64) -> rusqlite::Result<&[u8]> {
        if !matches!(&self.entry, Some((rowid, _)) if *rowid == entry_rowid) {
            let raw: Vec<u8> = conn
                .prepare_cached(RAW_OF_ENTRY)?
                .query_row([entry_rowid], |row| row.get(0))
                .optional()?
                .unwrap_or_default();
            self.entry = Some((entry_rowid, raw));
        }
        Ok(self.entry.as_ref().map_or(&[][..], |(_, raw)| raw))
    }

    /// The chunk `span` of the field at `json_path`; `None` when the field
    /// cannot be decoded here (the caller asks `fts_content`).
    fn span(
        &mut self,
        conn: &rusqlite::Connection,
        entry_rowid: i64,
        json_path: &str,
        (start, len): (i64, i64),
    ) -> rusqlite::Result<Option<String>> {
        let field_cached = matches!(&self.field,
            Some((rowid, path, _)) if *rowid == entry_rowid && path == json_path);
        if !field_cached {
            let raw = self.raw(conn, entry_rowid)?;
            let text = chunk_text::span_text(raw, json_path, 0, raw.len());
            self.field = Some((entry_rowid, json_path.to_owned(), text));
        }
        let (Some((_, _, Some(text))), Ok(start), Ok(len)) =
            (&self.field, usize::try_from(start), usize::try_from(len))
        else {
            return Ok(None);
        };
        Ok(text
            .get(start..start.saturating_add(len).min(text.len()))
            .map(str::to_owned))
    }
}
