//! What `entries.raw` leaves out (image payloads, shared texts), read back
//! for the commands that give whole entries (export, show).

use serde_json::Value;

use crate::normalize::payload::StoredImage;
use crate::normalize::shared::SharedValue;

/// The values cut out of one entry, to put back (`normalize::shared::restore`).
pub fn shared_values(
    conn: &rusqlite::Connection,
    entry_rowid: i64,
) -> rusqlite::Result<Vec<SharedValue>> {
    conn.prepare_cached(
        "SELECT r.json_path, r.key, r.key_index, t.hash, t.is_json, t.text
           FROM shared_refs r JOIN v_shared_texts t ON t.text_id = r.text_id
          WHERE r.entry_rowid = ?1",
    )?
    .query_map([entry_rowid], |row| {
        Ok(SharedValue {
            json_path: row.get(0)?,
            key: row.get(1)?,
            key_index: row.get(2)?,
            hash: row.get(3)?,
            is_json: row.get(4)?,
            text: row.get(5)?,
            deflated: None,
        })
    })?
    .collect()
}

/// Whether some entry of a file has `text` in its stored JSON (a blob's
/// digest, before `serve` reads the blob from outside the index).
pub fn entries_mention(
    conn: &rusqlite::Connection,
    file_id: i64,
    text: &str,
) -> rusqlite::Result<bool> {
    conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM entries WHERE file_id = ?1 AND instr(raw, ?2) > 0)",
    )?
    .query_row(rusqlite::params![file_id, text], |row| row.get(0))
}

/// The image payloads cut out of one entry.
pub fn stored_images(
    conn: &rusqlite::Connection,
    entry_rowid: i64,
) -> rusqlite::Result<Vec<StoredImage>> {
    conn.prepare_cached(
        "SELECT i.json_path, i.payload_key, i.payload_index, b.encoding, b.data
           FROM images i JOIN blobs b ON b.hash = i.hash WHERE i.entry_rowid = ?1",
    )?
    .query_map([entry_rowid], |row| {
        Ok(StoredImage {
            json_path: row.get(0)?,
            key: row.get(1)?,
            key_index: row.get(2)?,
            encoding: row.get(3)?,
            data: row.get(4)?,
        })
    })?
    .collect()
}

/// Puts everything cut out of an entry back: its shared texts and, with
/// `images`, its image payloads. `Err` names an image path not in the JSON.
pub fn restore_entry(
    conn: &rusqlite::Connection,
    entry_rowid: i64,
    value: &mut Value,
    images: bool,
) -> rusqlite::Result<Result<(), crate::normalize::payload::ImagePathError>> {
    crate::normalize::shared::restore(value, shared_values(conn, entry_rowid)?);
    if !images {
        return Ok(Ok(()));
    }
    Ok(crate::normalize::payload::restore_images(
        value,
        stored_images(conn, entry_rowid)?,
    ))
}

impl super::Index {
    /// The image payloads cut out of one entry (`stored_images`).
    pub fn stored_images(&self, entry_rowid: i64) -> rusqlite::Result<Vec<StoredImage>> {
        stored_images(&self.conn, entry_rowid)
    }

    /// Whether some entry of the file has `text` in its stored JSON
    /// (`entries_mention`).
    pub fn entries_mention(&self, file_id: i64, text: &str) -> rusqlite::Result<bool> {
        entries_mention(&self.conn, file_id, text)
    }
}
