//! pi_agent_rust's SQLite session files (`session_store = "sqlite"`): a
//! `<ts>_<id8>.sqlite` with `pi_session_header(id, json)` and
//! `pi_session_entries(seq, json)` holding the same JSON as its JSONL lines
//! (the port's `src/session_sqlite.rs`). Read here, read-only, as the lines
//! of the equivalent JSONL file: the header, then the entries by `seq`. The
//! port replaces the whole content in one transaction per save, so a file
//! that changed is read whole again.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

/// Why a `.sqlite` file is not read as a session.
#[derive(Debug, thiserror::Error)]
pub enum PortSqliteError {
    #[error("not a pi_agent_rust session database (no pi_session_header / pi_session_entries)")]
    NotASession,
    #[error("cannot read the SQLite file")]
    Sqlite(#[from] rusqlite::Error),
}

/// The file name of the port's session index, which holds no session.
pub const SESSION_INDEX: &str = "session-index.sqlite";

/// The session's lines: the header's JSON, then every entry's in `seq` order.
pub fn read_port_session(path: &Path) -> Result<Vec<String>, PortSqliteError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    let tables: i64 = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table'
            AND name IN ('pi_session_header', 'pi_session_entries')",
        [],
        |row| row.get(0),
    )?;
    if tables != 2 {
        return Err(PortSqliteError::NotASession);
    }
    let mut lines = Vec::new();
    let header: Option<String> = conn
        .query_row("SELECT json FROM pi_session_header LIMIT 1", [], |row| {
            row.get(0)
        })
        .map(Some)
        .or_else(|err| match err {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            err => Err(err),
        })?;
    lines.extend(header);
    let mut stmt = conn.prepare("SELECT json FROM pi_session_entries ORDER BY seq ASC")?;
    let rows = stmt.query_map([], |row| row.get::<_, String>(0))?;
    for row in rows {
        lines.push(row?);
    }
    Ok(lines)
}
