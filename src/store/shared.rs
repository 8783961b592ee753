//! Shared texts (migration 0011): values many entries repeat, stored and
//! indexed once. An entry links to each of its values (`shared_refs`);
//! the full-text rows of a value (`shared_chunks`) live as long as some
//! entry links to it, and the chunks of each linking entry point at them.

use rusqlite::{OptionalExtension, params};

use super::{Result, Writer};
use crate::normalize::shared::SharedValue;

impl Writer {
    /// Stores an entry's shared values (each text once) and its links to
    /// them; returns each value's `text_id` and whether it is new.
    pub(super) fn insert_shared(
        &self,
        entry_rowid: i64,
        file_id: i64,
        values: &[SharedValue],
    ) -> Result<Vec<(i64, bool)>> {
        let mut ids = Vec::with_capacity(values.len());
        for value in values {
            let inserted = self
                .conn
                .prepare_cached(
                    "INSERT INTO shared_texts(hash, is_json, text, deflated, text_len)
                     VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT(hash) DO NOTHING",
                )
                .and_then(|mut stmt| {
                    // Deflated, the text column holds '' (migration 0017).
                    let text = match value.deflated {
                        Some(_) => "",
                        None => value.text.as_str(),
                    };
                    stmt.execute(params![
                        value.hash,
                        value.is_json,
                        text,
                        value.deflated,
                        value.text.len() as i64
                    ])
                })
                .map_err(self.err())?;
            let text_id: i64 = self
                .conn
                .prepare_cached("SELECT text_id FROM shared_texts WHERE hash = ?1")
                .and_then(|mut stmt| stmt.query_row([&value.hash], |row| row.get(0)))
                .map_err(self.err())?;
            self.conn
                .prepare_cached(
                    "INSERT OR REPLACE INTO shared_refs(entry_rowid, json_path, key, key_index, file_id, text_id)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .and_then(|mut stmt| {
                    stmt.execute(params![
                        entry_rowid,
                        value.json_path,
                        value.key,
                        value.key_index,
                        file_id,
                        text_id
                    ])
                })
                .map_err(self.err())?;
            ids.push((text_id, inserted == 1));
        }
        Ok(ids)
    }

    /// The full-text row of one span of a shared text: found, or (for a
    /// text stored just now) made, with its words queued for the shards.
    pub(super) fn shared_fts_row(
        &self,
        text_id: i64,
        inner_path: &str,
        (start, len): (usize, usize),
        body: &str,
    ) -> Result<i64> {
        let found: Option<i64> = self
            .conn
            .prepare_cached(
                "SELECT fts_rowid FROM shared_chunks WHERE text_id = ?1 AND inner_path = ?2 AND start = ?3",
            )
            .and_then(|mut stmt| {
                stmt.query_row(params![text_id, inner_path, start as i64], |row| row.get(0))
                    .optional()
            })
            .map_err(self.err())?;
        if let Some(fts_rowid) = found {
            return Ok(fts_rowid);
        }
        let fts_rowid = self.next_fts_rowid(len)?;
        self.conn
            .prepare_cached(
                "INSERT INTO shared_chunks(fts_rowid, text_id, inner_path, start, len)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    fts_rowid,
                    text_id,
                    inner_path,
                    start as i64,
                    len as i64
                ])
            })
            .map_err(self.err())?;
        self.queue_fts_row(fts_rowid, body);
        Ok(fts_rowid)
    }

    /// After a file's `shared_refs` are gone: the shared texts nobody links
    /// to any more go, with their full-text rows (logged for the shards).
    pub(super) fn drop_unshared(&self, text_ids: &[i64]) -> Result<()> {
        for &text_id in text_ids {
            let linked: bool = self
                .conn
                .prepare_cached("SELECT EXISTS (SELECT 1 FROM shared_refs WHERE text_id = ?1)")
                .and_then(|mut stmt| stmt.query_row([text_id], |row| row.get(0)))
                .map_err(self.err())?;
            if linked {
                continue;
            }
            self.delete_shared_fts_rows(text_id)?;
            for sql in [
                "DELETE FROM shared_chunks WHERE text_id = ?1",
                "DELETE FROM shared_texts WHERE text_id = ?1",
            ] {
                self.conn
                    .prepare_cached(sql)
                    .and_then(|mut stmt| stmt.execute([text_id]))
                    .map_err(self.err())?;
            }
        }
        Ok(())
    }

    /// The shared texts a file links to (before its links are deleted).
    pub(super) fn shared_of_file(&self, file_id: i64) -> Result<Vec<i64>> {
        self.conn
            .prepare_cached("SELECT DISTINCT text_id FROM shared_refs WHERE file_id = ?1")
            .and_then(|mut stmt| stmt.query_map([file_id], |row| row.get(0))?.collect())
            .map_err(self.err())
    }
}
