//! Redaction's state (migration 0014): the key in `meta`, and the
//! `redactions` rows of each entry.

use rusqlite::{OptionalExtension, params};

use super::{Index, Result, StoreError, Writer};
use crate::normalize::redact::RedactionRow;
use crate::secrets::hex;

/// Whether the index redacts, and with which key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RedactionState {
    pub key: [u8; 32],
    /// Turned on, but not every file has been re-read since: the next sync
    /// re-reads them all.
    pub pending: bool,
}

impl Writer {
    /// The index's redaction state; with `enable`, redaction is turned on
    /// (a new random key, pending until `redaction_done`) if it was off.
    pub fn redaction(&self, enable: bool) -> Result<Option<RedactionState>> {
        if let Some(state) = read_state(&self.conn).map_err(self.err())? {
            return Ok(Some(state));
        }
        if !enable {
            return Ok(None);
        }
        let key = random_key().map_err(|source| StoreError::RedactionKey {
            path: self.path.clone(),
            source,
        })?;
        self.conn
            .execute(
                "INSERT INTO meta(key, value) VALUES ('redact_key', ?1), ('redact_pending', '1')",
                [hex(&key)],
            )
            .map_err(self.err())?;
        Ok(Some(RedactionState { key, pending: true }))
    }

    /// Every file has been re-read with redaction on.
    pub fn redaction_done(&self) -> Result<()> {
        self.conn
            .execute("DELETE FROM meta WHERE key = 'redact_pending'", [])
            .map(|_| ())
            .map_err(self.err())
    }

    pub(super) fn insert_redactions(
        &self,
        entry_rowid: i64,
        file_id: i64,
        rows: &[RedactionRow],
    ) -> Result<()> {
        for row in rows {
            self.conn
                .prepare_cached(
                    "INSERT INTO redactions(entry_rowid, file_id, json_path, kind, hash, preview)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .and_then(|mut stmt| {
                    stmt.execute(params![
                        entry_rowid,
                        file_id,
                        row.json_path,
                        row.kind,
                        row.hash,
                        row.preview
                    ])
                })
                .map_err(self.err())?;
        }
        Ok(())
    }
}

impl Index {
    /// The redaction state, `None` when the index does not redact.
    pub fn redaction(&self) -> Result<Option<RedactionState>> {
        read_state(&self.conn).map_err(self.err())
    }
}

fn read_state(conn: &rusqlite::Connection) -> rusqlite::Result<Option<RedactionState>> {
    let key: Option<String> = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'redact_key'",
            [],
            |row| row.get(0),
        )
        .optional()?;
    let Some(key) = key.as_deref().and_then(unhex) else {
        return Ok(None);
    };
    let pending = conn
        .query_row(
            "SELECT 1 FROM meta WHERE key = 'redact_pending'",
            [],
            |_| Ok(()),
        )
        .optional()?
        .is_some();
    Ok(Some(RedactionState { key, pending }))
}

fn random_key() -> std::io::Result<[u8; 32]> {
    use std::io::Read;
    let mut key = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut key)?;
    Ok(key)
}

fn unhex(text: &str) -> Option<[u8; 32]> {
    let mut key = [0u8; 32];
    if text.len() != 64 {
        return None;
    }
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(key)
}
