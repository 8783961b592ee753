//! `piidx secrets`: what in the index looks like a credential (`crate::secrets`'
//! rules), so a user knows what to rotate. Every text field of every entry
//! in scope is read and scanned; the answer never holds a secret whole,
//! only a masked preview.

use serde::Serialize;

use super::scope::{Columns, Scope};
use crate::secrets::{Detector, mask};
use crate::store::Index;

#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    #[error("the secret rules do not compile (a bug in piidx)")]
    Rules(#[from] regex::Error),
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
}

/// One secret found in one text field of one entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SecretFound {
    pub session_id: String,
    pub session_path: String,
    pub entry_id: String,
    pub timestamp: Option<String>,
    /// The kind of text holding it (`user`, `tool_result`, …).
    pub role: String,
    pub json_path: String,
    /// The rule that found it (a gitleaks rule id: `github-pat`, `private-key`, …).
    pub kind: String,
    /// Its first characters and length, never the secret itself.
    pub preview: String,
}

/// Every secret in the entries `scope` selects, oldest first (then by
/// session and place in the file).
pub fn list(
    store: &Index,
    scope: &Scope,
    limit: Option<usize>,
) -> Result<Vec<SecretFound>, SecretsError> {
    let detector = Detector::new()?;
    let conditions = scope.conditions(&Columns::sessions("e.timestamp_ms"), 1);
    let sql = format!(
        "SELECT s.session_id, s.file_path, e.entry_id, e.timestamp, t.kind, t.json_path, t.text
           FROM texts t
           JOIN entries e ON e.entry_rowid = t.entry_rowid
           JOIN sessions s ON s.file_id = t.file_id
          WHERE t.text IS NOT NULL{}
          ORDER BY e.timestamp_ms, s.session_id, e.byte_offset, e.obj_in_line, t.json_path",
        conditions.clause()
    );
    let conn = store.connection();
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.query(rusqlite::params_from_iter(conditions.params))?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let text: String = row.get(6)?;
        for found in detector.find(&text) {
            let secret = text.get(found.start..found.end).unwrap_or_default();
            out.push(SecretFound {
                session_id: row.get(0)?,
                session_path: row.get(1)?,
                entry_id: row.get(2)?,
                timestamp: row.get(3)?,
                role: row.get(4)?,
                json_path: row.get(5)?,
                kind: found.rule.to_owned(),
                preview: mask(secret),
            });
            if limit.is_some_and(|limit| out.len() >= limit) {
                return Ok(out);
            }
        }
    }
    Ok(out)
}
