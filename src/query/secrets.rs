//! `piidx secrets`: what in the index looks like a credential (`crate::secrets`'
//! rules), so a user knows what to rotate. Every text field of every entry
//! in scope is scanned, and the secrets `sync --redact` took out are listed
//! from `redactions`; the answer never holds a secret whole, only a masked
//! preview. `find` names where a given value was redacted.

use std::sync::mpsc;

use rayon::prelude::*;
use serde::Serialize;

use super::scope::{Columns, Scope};
use crate::secrets::{detector, keyed_hash, mask};
use crate::store::{Index, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    #[error(
        "this index does not redact secrets, so it keeps no hashes to look values up by; `piidx search` finds text that is still there"
    )]
    NotRedacting,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
}

/// One secret in one text field of one entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SecretFound {
    pub session_id: String,
    pub session_path: String,
    pub entry_id: String,
    pub timestamp: Option<String>,
    /// The kind of text holding it (`user`, `tool_result`, …); for a
    /// redacted secret, `redacted`.
    pub role: String,
    pub json_path: String,
    /// The rule that found it (a gitleaks rule id: `github-pat`, `private-key`, …).
    pub kind: String,
    /// Its first characters and length, never the secret itself.
    pub preview: String,
    /// Taken out by `sync --redact`: the index no longer holds it.
    pub redacted: bool,
    /// Where it is, to sort by: time, session, place in the file.
    #[serde(skip)]
    order: (Option<i64>, String, i64, i64, String),
}

/// Every secret in the entries `scope` selects, still in the text or
/// redacted, oldest first (then by session and place in the file).
pub fn list(
    store: &Index,
    scope: &Scope,
    limit: Option<usize>,
) -> Result<Vec<SecretFound>, SecretsError> {
    let mut out = redacted(store, scope, None)?;
    out.extend(scan_texts(store, scope)?);
    out.sort_by(|a, b| a.order.cmp(&b.order));
    if let Some(limit) = limit {
        out.truncate(limit);
    }
    Ok(out)
}

/// Texts read from the index before they are handed to the rule set, in
/// bytes: large enough that a batch keeps every worker busy, small enough
/// that few are held at once.
const SCAN_BATCH_BYTES: usize = 4 << 20;

/// The secrets still in the text of the entries in scope. Every text is
/// read (and inflated) on this thread while the rules run over the texts
/// read before, on every core: on one thread the rules took longer than
/// the reading.
fn scan_texts(store: &Index, scope: &Scope) -> Result<Vec<SecretFound>, SecretsError> {
    let conditions = scope.conditions(&Columns::sessions("e.timestamp_ms"), 1);
    let sql = format!(
        "SELECT s.session_id, s.file_path, e.entry_id, e.timestamp, t.kind, t.json_path,
                e.timestamp_ms, e.byte_offset, e.obj_in_line, t.text
           FROM texts_full t
           JOIN entries e ON e.entry_rowid = t.entry_rowid
           JOIN sessions s ON s.file_id = t.file_id
          WHERE t.text IS NOT NULL{}",
        conditions.clause()
    );
    let conn = store.connection();
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.query(rusqlite::params_from_iter(conditions.params))?;
    std::thread::scope(|threads| {
        let (batches, to_scan) = mpsc::sync_channel::<Vec<(Place, String)>>(2);
        let scanner = threads.spawn(move || {
            let mut found = Vec::new();
            for batch in to_scan {
                found.par_extend(batch.into_par_iter().flat_map_iter(secrets_in));
            }
            found
        });
        let read = send_batches(&mut rows, batches);
        let found = scanner
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        read.map(|()| found)
    })
}

/// Reads every row's place and text into batches of `SCAN_BATCH_BYTES`
/// and sends them, until the rows end or the scanner is gone (its join
/// then says why).
fn send_batches(
    rows: &mut rusqlite::Rows<'_>,
    batches: mpsc::SyncSender<Vec<(Place, String)>>,
) -> Result<(), SecretsError> {
    let mut batch = Vec::new();
    let mut bytes = 0;
    while let Some(row) = rows.next()? {
        let text: String = row.get(9)?;
        bytes += text.len();
        batch.push((Place::of(row)?, text));
        if bytes >= SCAN_BATCH_BYTES {
            bytes = 0;
            if batches.send(std::mem::take(&mut batch)).is_err() {
                return Ok(());
            }
        }
    }
    let _ = batches.send(batch);
    Ok(())
}

/// Every secret the rule set finds in one text.
fn secrets_in((place, text): (Place, String)) -> Vec<SecretFound> {
    detector()
        .find(&text)
        .into_iter()
        .map(|found| {
            let secret = text.get(found.start..found.end).unwrap_or_default();
            place.secret(found.rule, mask(secret), false)
        })
        .collect()
}

/// Where `value` was redacted (`piidx secrets --find`), oldest first.
pub fn find(store: &Index, value: &str) -> Result<Vec<SecretFound>, SecretsError> {
    let state = store.redaction()?.ok_or(SecretsError::NotRedacting)?;
    let hash = keyed_hash(&state.key, value);
    let mut out = redacted(store, &Scope::default(), Some(&hash))?;
    out.sort_by(|a, b| a.order.cmp(&b.order));
    Ok(out)
}

/// The `redactions` rows in scope (with that hash, if given).
fn redacted(
    store: &Index,
    scope: &Scope,
    hash: Option<&str>,
) -> Result<Vec<SecretFound>, SecretsError> {
    let conditions = scope.conditions(&Columns::sessions("e.timestamp_ms"), 2);
    let sql = format!(
        "SELECT s.session_id, s.file_path, e.entry_id, e.timestamp, 'redacted', r.json_path,
                e.timestamp_ms, e.byte_offset, e.obj_in_line, r.kind, r.preview
           FROM redactions r
           JOIN entries e ON e.entry_rowid = r.entry_rowid
           JOIN sessions s ON s.file_id = r.file_id
          WHERE (?1 IS NULL OR r.hash = ?1){}",
        conditions.clause()
    );
    let conn = store.connection();
    let mut stmt = conn.prepare(&sql)?;
    let params = std::iter::once(rusqlite::types::Value::from(hash.map(str::to_owned)))
        .chain(conditions.params);
    let mut rows = stmt.query(rusqlite::params_from_iter(params))?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let kind: String = row.get(9)?;
        out.push(Place::of(row)?.secret(&kind, row.get(10)?, true));
    }
    Ok(out)
}

/// Where a text is: a row's first nine columns.
struct Place {
    session_id: String,
    session_path: String,
    entry_id: String,
    timestamp: Option<String>,
    role: String,
    json_path: String,
    timestamp_ms: Option<i64>,
    byte_offset: i64,
    obj_in_line: i64,
}

impl Place {
    fn of(row: &rusqlite::Row<'_>) -> rusqlite::Result<Place> {
        Ok(Place {
            session_id: row.get(0)?,
            session_path: row.get(1)?,
            entry_id: row.get(2)?,
            timestamp: row.get(3)?,
            role: row.get(4)?,
            json_path: row.get(5)?,
            timestamp_ms: row.get(6)?,
            byte_offset: row.get(7)?,
            obj_in_line: row.get(8)?,
        })
    }

    fn secret(&self, kind: &str, preview: String, redacted: bool) -> SecretFound {
        SecretFound {
            order: (
                self.timestamp_ms,
                self.session_id.clone(),
                self.byte_offset,
                self.obj_in_line,
                self.json_path.clone(),
            ),
            session_id: self.session_id.clone(),
            session_path: self.session_path.clone(),
            entry_id: self.entry_id.clone(),
            timestamp: self.timestamp.clone(),
            role: self.role.clone(),
            json_path: self.json_path.clone(),
            kind: kind.to_owned(),
            preview,
            redacted,
        }
    }
}

/// How many secrets were redacted from the session file `file_id` (so an
/// export of it is not the original).
pub fn redacted_in_file(store: &Index, file_id: i64) -> rusqlite::Result<i64> {
    store.connection().query_row(
        "SELECT count(*) FROM redactions WHERE file_id = ?1",
        [file_id],
        |row| row.get(0),
    )
}
